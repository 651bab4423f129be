/*-------------------------------------------------------------------------
 *
 * fuzz_arena.h
 *		palloc and friends for the fuzz targets: an arena freed after each
 *		input (arena_reset), as the batch memory context is in the backend,
 *		so that LeakSanitizer sees nothing.  Included once per target, after
 *		the target's die().
 *
 *-------------------------------------------------------------------------
 */
#ifndef KS_FUZZ_ARENA_H
#define KS_FUZZ_ARENA_H

typedef struct Chunk
{
	struct Chunk *next;
	size_t		size;
} Chunk;

static Chunk *arena = NULL;

static void *
chunk_alloc(size_t size, int flags)
{
	Chunk	   *c;

	if (size > MaxAllocSize && !(flags & MCXT_ALLOC_HUGE))
		die("palloc request larger than MaxAllocSize (the backend would ERROR)");
	c = malloc(sizeof(Chunk) + size);
	if (c == NULL)
		die("out of memory");
	c->size = size;
	c->next = arena;
	arena = c;
	if (flags & MCXT_ALLOC_ZERO)
		memset(c + 1, 0, size);
	return c + 1;
}

void
pfree(void *p)
{
	(void) p;					/* freed with the arena */
}

void *
palloc(Size size)
{
	return chunk_alloc(size, 0);
}

void *
palloc0(Size size)
{
	return chunk_alloc(size, MCXT_ALLOC_ZERO);
}

void *
palloc_extended(Size size, int flags)
{
	return chunk_alloc(size, flags);
}

void *
repalloc(void *p, Size size)
{
	Chunk	   *old = (Chunk *) p - 1;
	void	   *n = chunk_alloc(size, 0);

	memcpy(n, p, Min(old->size, size));
	return n;
}

char *
pnstrdup(const char *in, Size size)
{
	size_t		n = strnlen(in, size);
	char	   *s = chunk_alloc(n + 1, 0);

	memcpy(s, in, n);
	s[n] = '\0';
	return s;
}

char *
pstrdup(const char *in)
{
	return pnstrdup(in, strlen(in));
}

void *
pg_malloc(size_t size)
{
	return chunk_alloc(size, 0);
}

void *
pg_malloc0(size_t size)
{
	return chunk_alloc(size, MCXT_ALLOC_ZERO);
}

void *
pg_malloc_extended(size_t size, int flags)
{
	return chunk_alloc(size, flags);
}

void *
pg_realloc(void *p, size_t size)
{
	return p ? repalloc(p, size) : chunk_alloc(size, 0);
}

char *
pg_strdup(const char *in)
{
	return pstrdup(in);
}

void
pg_free(void *p)
{
	(void) p;
}

static void
arena_reset(void)
{
	while (arena)
	{
		Chunk	   *n = arena->next;

		free(arena);
		arena = n;
	}
}

#endif							/* KS_FUZZ_ARENA_H */
