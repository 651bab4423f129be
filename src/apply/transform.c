/*-------------------------------------------------------------------------
 *
 * transform.c
 *		The declarative transform of a pipeline (docs/transform.md):
 *		filter => a boolean SQL expression over the decoded row, and
 *		computed => {"column": "<SQL expression>"}, evaluated on each
 *		decoded upsert before the reduce, so that every apply strategy
 *		(MERGE, heap, on_conflict, history, append, function) applies the
 *		transformed rows as it applies decoded ones.
 *
 * An expression is never spliced into SQL text.  Its text goes through
 * PostgreSQL's raw parser (as PL/pgSQL's expressions do), must be one
 * expression and nothing else, and is analyzed with the target's columns
 * as parameters (a column name alone refers to the decoded value of that
 * column); the analyzed tree is evaluated by the executor's expression
 * machinery.  The same analysis runs at create/alter (the API's check,
 * ks_transform_check) and in the worker, both with kafka_sink's pinned
 * search_path (pg_catalog, pg_temp), both as the pipeline's owner.  A
 * routed pipeline's expressions are analyzed per routed table: at
 * create/alter against those that exist (the text alone when none is
 * known), in the worker where route.c opens each table
 * (ks_transform_check_target: a refusal quarantines that table's
 * messages as target_refused).
 *
 * Refused at analysis: anything but one expression, a column that is not
 * the target's (or has no decoded value, or is computed itself), a
 * subquery, an aggregate, a window function, a set-returning function,
 * any function, operator or cast that is not immutable (a retried batch
 * must compute the same values: now() or a text -> timestamptz cast
 * depend on when, or on the session), a function the caller may not
 * execute, a filter that is not boolean, a computed value not assignable
 * to its column's type.
 *
 * At run time the whole batch is evaluated in one subtransaction; when an
 * expression raises for one row through the row's values (a data
 * exception, a RAISE of the owner's function), that row is quarantined
 * as expression_error and the evaluation goes on after it in a new
 * subtransaction: one subtransaction per batch, plus one per failing row.
 * The expressions are planned in the first of them: planning folds
 * constants, so an expression whose constant part raises (1/0) raises
 * there, for every row alike, and every row is quarantined as
 * expression_error (the check at create/alter runs nothing, so it passes
 * such an expression).
 * Any other error (a permission denied, ...) is not the message's fault
 * and propagates: the pipeline retries or fails with it.
 *
 * Owns: the analysis and evaluation of filter and computed expressions,
 * and the API's check of them (kafka_sink._check_transform).
 * Must not: build SQL text, write the target or the catalog, or run an
 * expression at check time (only in the worker's batch, and for
 * message_fate's question through ks_transform_filters_out).
 *
 *-------------------------------------------------------------------------
 */
#include "kafka_sink.h"
#include "transform.h"
#include "errclass.h"
#include "target.h"

#include "access/sysattr.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parse_expr.h"
#include "parser/parse_node.h"
#include "parser/parser.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/resowner.h"

/* what is being analyzed or evaluated, for the error context */
typedef struct ExprCtx
{
	const char *target;
	KsExprColumn *cols;
	int			ncols;
	const char *what;			/* "filter" or "computed column \"x\"" */
	bool		computing;		/* analyzing a computed column */
	List	   *computed;		/* of KsOption: the computed columns */
} ExprCtx;

static void
expr_error_context(void *arg)
{
	ExprCtx    *c = (ExprCtx *) arg;

	if (c->what)
		errcontext("%s of the pipeline", c->what);
}

static bool
is_computed(List *computed, const char *name)
{
	ListCell   *lc;

	foreach(lc, computed)
		if (strcmp(((KsOption *) lfirst(lc))->name, name) == 0)
			return true;
	return false;
}

/* A column name alone is the decoded value of that column: a parameter. */
static Node *
column_ref_hook(ParseState *pstate, ColumnRef *cref)
{
	ExprCtx    *c = (ExprCtx *) pstate->p_ref_hook_state;
	const char *name;
	Param	   *prm;

	if (list_length(cref->fields) != 1 || !IsA(linitial(cref->fields), String))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("%s refers to a column by a qualified name", c->what),
				 errhint("Refer to the target's columns by their name alone, as in price * quantity."),
				 parser_errposition(pstate, cref->location)));
	name = strVal(linitial(cref->fields));
	for (int i = 0; i < c->ncols; i++)
	{
		if (strcmp(c->cols[i].name, name) != 0)
			continue;
		if (!c->cols[i].readable)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("%s refers to column \"%s\", which kafka_sink writes itself", c->what, name),
					 errhint("An expression reads the decoded message's columns, not lineage or version columns."),
					 parser_errposition(pstate, cref->location)));
		if (is_computed(c->computed, name))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
					 errmsg("%s refers to computed column \"%s\"", c->what, name),
					 errhint("Expressions read the decoded row; repeat the other column's expression instead."),
					 parser_errposition(pstate, cref->location)));
		prm = makeNode(Param);
		prm->paramkind = PARAM_EXTERN;
		prm->paramid = i + 1;
		prm->paramtype = c->cols[i].typid;
		prm->paramtypmod = c->cols[i].typmod;
		prm->paramcollid = c->cols[i].collation;
		prm->location = cref->location;
		return (Node *) prm;
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("%s refers to column \"%s\", which target %s does not have", c->what, name, c->target),
			 errhint("Refer to the target's columns by name; quote a name with capitals as \"Name\"."),
			 parser_errposition(pstate, cref->location)));
	return NULL;				/* not reached */
}

/* check_functions_in_node: a function the caller may not execute */
static bool
not_executable(Oid func_id, void *context)
{
	(void) context;
	return KS_PROC_ACLCHECK(func_id, GetUserId(), ACL_EXECUTE) != ACLCHECK_OK;
}

static bool
find_not_executable(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, not_executable, context))
		return true;
	return expression_tree_walker(node, find_not_executable, context);
}

/*
 * The text of one expression, parsed: one expression and nothing else
 * (its raw parse tree), else an error.
 */
static Node *
parse_one(ExprCtx *c, const char *text)
{
	List	   *raw;
	SelectStmt *sel;
	ResTarget  *rt;
	bool		bad_shape;

	if (text == NULL || text[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is empty", c->what),
				 errhint("Pass a SQL expression over the target's columns, as in amount > 0.")));
	/* the grammar of a PL/pgSQL expression: a SELECT's target list and clauses */
	raw = raw_parser(text, RAW_PARSE_PLPGSQL_EXPR);
	sel = (list_length(raw) == 1 && IsA(linitial_node(RawStmt, raw)->stmt, SelectStmt))
		? (SelectStmt *) linitial_node(RawStmt, raw)->stmt : NULL;
	bad_shape = sel == NULL || list_length(sel->targetList) != 1 || sel->op != SETOP_NONE ||
		sel->fromClause || sel->whereClause || sel->groupClause || sel->havingClause ||
		sel->windowClause || sel->sortClause || sel->limitCount || sel->limitOffset ||
		sel->lockingClause || sel->distinctClause || sel->intoClause || sel->withClause ||
		sel->valuesLists;
	rt = bad_shape ? NULL : linitial_node(ResTarget, sel->targetList);
	if (bad_shape || rt->name != NULL ||
		(IsA(rt->val, ColumnRef) && IsA(llast(((ColumnRef *) rt->val)->fields), A_Star)))
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("%s must be one SQL expression", c->what),
				 errdetail("It has a list, a clause (FROM, WHERE, ...), an alias or a *."),
				 errhint("Pass an expression alone, as in amount > 0 or lower(email).")));
	return rt->val;
}

/*
 * The text of one expression, parsed and analyzed: a boolean (the filter)
 * or a value of column col's type (a computed column).
 */
static Expr *
analyze(ExprCtx *c, const char *text, int col)
{
	ParseState *ps;
	Node	   *e;

	ps = make_parsestate(NULL);
	ps->p_sourcetext = text;
	ps->p_pre_columnref_hook = column_ref_hook;
	ps->p_ref_hook_state = c;
	e = transformExpr(ps, parse_one(c, text), EXPR_KIND_OTHER);
	if (ps->p_hasSubLinks)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s cannot contain a subquery", c->what),
				 errhint("An expression reads the message's own row only.")));
	if (ps->p_hasAggs || ps->p_hasWindowFuncs)
		ereport(ERROR,
				(errcode(ERRCODE_GROUPING_ERROR),
				 errmsg("%s cannot contain an aggregate or window function", c->what),
				 errhint("An expression reads one message's row: no aggregate across rows.")));
	if (ps->p_hasTargetSRFs || expression_returns_set(e))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s cannot contain a set-returning function", c->what),
				 errhint("An expression gives one value per message.")));
	if (col < 0)
		e = coerce_to_boolean(ps, e, "the filter");
	else
	{
		Oid			have = exprType(e);
		Node	   *coerced = coerce_to_target_type(ps, e, have, c->cols[col].typid, c->cols[col].typmod,
													COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);

		if (coerced == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("%s is of type %s but its expression is of type %s", c->what,
							format_type_with_typemod(c->cols[col].typid, c->cols[col].typmod),
							format_type_be(have)),
					 errhint("Cast the expression to the column's type, as in (%s)::%s.", text,
							 format_type_be(c->cols[col].typid))));
		e = coerced;
	}
	assign_expr_collations(ps, e);
	if (contain_mutable_functions(e))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is not immutable", c->what),
				 errdetail("It calls a volatile or stable function, operator or cast (now(), random(), a cast from text to a time, ...):"
						   " a batch applied again after a crash must compute the same values."),
				 errhint("Use immutable functions only; a time belongs in the message (a field, or kafka.timestamp as a column).")));
	if (find_not_executable(e, NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s calls a function role \"%s\" may not execute", c->what,
						GetUserNameFromId(GetUserId(), false)),
				 errhint("The pipeline runs as its owner: grant EXECUTE on the function to the owner.")));
	free_parsestate(ps);
	return (Expr *) e;
}

static int
column_of(ExprCtx *c, const char *name)
{
	for (int i = 0; i < c->ncols; i++)
		if (strcmp(c->cols[i].name, name) == 0)
			return i;
	return -1;
}

/* The computed column's index, after checking it may be computed. */
static int
computed_column(ExprCtx *c, const char *name)
{
	int			col = column_of(c, name);

	if (col < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("computed column \"%s\" is not a column of target %s", name, c->target),
				 errhint("computed maps the target's column names to expressions.")));
	if (!c->cols[col].computable)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("column \"%s\" of target %s cannot be computed", name, c->target),
				 errdetail("Key columns, the order column and the columns kafka_sink writes itself come from the message."),
				 errhint("Compute another column; a key or order column is mapped with columns => instead.")));
	return col;
}

/*
 * Analyzes the filter (NULL: none) and each computed column (a list of
 * KsOption, column -> expression) against the columns cols of target
 * target_name, raising the first refusal; cols NULL (no table yet: a
 * routed pipeline's tables are analyzed where the worker opens them):
 * each is only parsed, one expression and nothing else.  Runs nothing.
 */
void
ks_transform_check(const char *target_name, KsExprColumn *cols, int ncols,
				   const char *filter, List *computed)
{
	ExprCtx		c = {target_name, cols, ncols, NULL, false, computed};
	ErrorContextCallback cb = {error_context_stack, expr_error_context, &c};
	ListCell   *lc;

	error_context_stack = &cb;
	if (filter)
	{
		c.what = "the filter";
		if (cols == NULL)
			(void) parse_one(&c, filter);
		else
			analyze(&c, filter, -1);
	}
	foreach(lc, computed)
	{
		KsOption   *o = lfirst(lc);
		int			col;

		c.what = psprintf("computed column \"%s\"", o->name);
		if (cols == NULL)
		{
			(void) parse_one(&c, o->value);
			continue;
		}
		c.what = NULL;
		col = computed_column(&c, o->name);
		c.what = psprintf("computed column \"%s\"", o->name);
		analyze(&c, o->value, col);
	}
	error_context_stack = cb.previous;
}

/* ---- the batch ---- */

typedef struct Transform
{
	ExprCtx		ctx;
	ExprState  *filter;
	int			ncomputed;
	int		   *col;			/* per computed: its column */
	ExprState **expr;
	const char **what;
	int16	   *typlen;
	bool	   *typbyval;
	ExprContext *econtext;
	ParamListInfo params;
	bool		compiled;		/* compile() went through */
} Transform;

/* the columns of target t as the expressions of p see them */
static void
target_columns(KsPipeline *p, KsTarget *t, ExprCtx *ctx)
{
	ctx->target = t->qualified_name;
	ctx->cols = palloc0(sizeof(KsExprColumn) * Max(t->ncolumns, 1));
	ctx->ncols = t->ncolumns;
	ctx->computed = p->targets.computed;
	for (int i = 0; i < t->ncolumns; i++)
	{
		KsColumn   *col = &t->columns[i];
		KsExprColumn *ec = &ctx->cols[i];

		ec->name = col->name;
		ec->typid = col->typid;
		ec->typmod = col->typmod;
		ec->collation = col->collation;
		ec->readable = col->lineage == NULL && !col->history;
		ec->computable = ec->readable && !col->is_key && !col->is_order;
	}
}

/*
 * Analyzes p's filter and computed columns against the opened target t
 * (nothing without them), raising the first refusal: a routed table is
 * checked where the worker first uses it in a batch (route.c), so that a
 * table the expressions do not fit has its messages quarantined as
 * target_refused, not the batch failed.
 */
void
ks_transform_check_target(KsPipeline *p, KsTarget *t)
{
	ExprCtx		c;

	if (p->targets.filter == NULL && p->targets.computed == NIL)
		return;
	target_columns(p, t, &c);
	ks_transform_check(c.target, c.cols, c.ncols, p->targets.filter, p->targets.computed);
}

/*
 * p's expressions analyzed against t and planned into tf (zeroed by the
 * caller; tf->ctx.what names the expression being compiled, for an error).
 * Planning folds constants, so an expression whose constant part raises
 * (1/0, 'x'::text::integer) raises here, for every row alike.
 */
static void
compile(KsPipeline *p, KsTarget *t, Transform *tf)
{
	KsTargets  *tg = &p->targets;
	int			n = 0;
	ListCell   *lc;

	target_columns(p, t, &tf->ctx);
	if (tg->filter)
	{
		tf->ctx.what = "the filter";
		tf->filter = ExecInitExpr(expression_planner(analyze(&tf->ctx, tg->filter, -1)), NULL);
	}
	tf->ncomputed = list_length(tg->computed);
	tf->col = palloc(sizeof(int) * Max(tf->ncomputed, 1));
	tf->expr = palloc(sizeof(ExprState *) * Max(tf->ncomputed, 1));
	tf->what = palloc(sizeof(char *) * Max(tf->ncomputed, 1));
	tf->typlen = palloc(sizeof(int16) * Max(tf->ncomputed, 1));
	tf->typbyval = palloc(sizeof(bool) * Max(tf->ncomputed, 1));
	foreach(lc, tg->computed)
	{
		KsOption   *o = lfirst(lc);

		tf->col[n] = computed_column(&tf->ctx, o->name);
		tf->what[n] = psprintf("computed column \"%s\"", o->name);
		tf->ctx.what = tf->what[n];
		tf->expr[n] = ExecInitExpr(expression_planner(analyze(&tf->ctx, o->value, tf->col[n])), NULL);
		get_typlenbyval(t->columns[tf->col[n]].typid, &tf->typlen[n], &tf->typbyval[n]);
		n++;
	}
	tf->econtext = CreateStandaloneExprContext();
	tf->params = makeParamList(t->ncolumns);
	tf->params->numParams = t->ncolumns;
	for (int i = 0; i < t->ncolumns; i++)
	{
		tf->params->params[i].ptype = t->columns[i].typid;
		tf->params->params[i].pflags = PARAM_FLAG_CONST;
	}
	tf->econtext->ecxt_param_list_info = tf->params;
	tf->ctx.what = NULL;
	tf->compiled = true;
}

/* One row: the filter, then each computed column (values in out_cxt). */
static void
eval_row(Transform *tf, KsRow *r, MemoryContext out_cxt)
{
	ExprContext *ec = tf->econtext;
	bool		isnull;
	Datum		v;

	for (int i = 0; i < tf->params->numParams; i++)
	{
		tf->params->params[i].value = r->values[i];
		tf->params->params[i].isnull = r->nulls[i] || !r->present[i];
	}
	ResetExprContext(ec);
	if (tf->filter)
	{
		tf->ctx.what = "the filter";
		v = ExecEvalExprSwitchContext(tf->filter, ec, &isnull);
		/* as in WHERE: NULL does not pass */
		if (isnull || !DatumGetBool(v))
		{
			r->filtered = true;
			r->skipped = true;	/* reduce, history and the guards pass it by */
			return;
		}
	}
	for (int k = 0; k < tf->ncomputed; k++)
	{
		int			c = tf->col[k];

		tf->ctx.what = tf->what[k];
		v = ExecEvalExprSwitchContext(tf->expr[k], ec, &isnull);
		if (isnull)
			r->values[c] = (Datum) 0;
		else
		{
			MemoryContext old = MemoryContextSwitchTo(out_cxt);

			r->values[c] = datumCopy(v, tf->typbyval[k], tf->typlen[k]);
			MemoryContextSwitchTo(old);
		}
		r->nulls[c] = isnull;
		r->present[c] = true;
	}
	tf->ctx.what = NULL;
}

/*
 * Whether the pipeline's filter leaves out the decoded upsert r of target
 * t (message_fate's question, lineage.c); false without a filter.  An
 * expression's error propagates.
 */
bool
ks_transform_filters_out(KsPipeline *p, KsTarget *t, KsRow *r)
{
	Transform  *tf;
	ErrorContextCallback cb;

	if (p->targets.filter == NULL)
		return false;
	tf = palloc0(sizeof(Transform));
	compile(p, t, tf);
	cb.previous = error_context_stack;
	cb.callback = expr_error_context;
	cb.arg = &tf->ctx;
	error_context_stack = &cb;
	eval_row(tf, r, CurrentMemoryContext);
	error_context_stack = cb.previous;
	FreeExprContext(tf->econtext, true);
	return r->filtered;
}

/* an error raised through a row's values: the message's fault */
static bool
row_fault(int sqlerrcode)
{
	KsErrClass  k = ks_errclass(sqlerrcode);

	return k == KS_ERR_BAD_VALUE || k == KS_ERR_TOO_LARGE || k == KS_ERR_REJECTED;
}

/* row r quarantined as expression_error (neither filtered nor skipped) */
static void
expression_fault(KsRow *r, char *detail)
{
	r->reason = KS_EXPRESSION_ERROR;
	r->detail = detail;
	r->filtered = r->skipped = false;
}

/*
 * The target's decoded upserts through the pipeline's filter and computed
 * columns: a row the filter leaves out is marked filtered (counted, not
 * applied), a computed column takes its value, a row whose expression
 * raises is quarantined as expression_error.  Deletes, truncates,
 * duplicates and rows already quarantined are left alone.
 */
void
ks_transform_batch(KsBatch *batch, KsBatchTarget *bt)
{
	KsPipeline *p = batch->pipeline;
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorContextCallback cb;
	Transform  *tf;
	int		   *sel;
	int			n = 0;
	int			start = 0;

	if (p->targets.filter == NULL && p->targets.computed == NIL)
		return;
	sel = palloc(sizeof(int) * Max(bt->nmsgs, 1));
	for (int i = 0; i < bt->nmsgs; i++)
	{
		KsRow	   *r = &bt->rows[i];

		if (r->reason == KS_OK && !r->is_delete && !r->is_truncate && !r->skipped && !r->duplicate)
			sel[n++] = i;
	}
	if (n == 0)
		return;
	tf = palloc0(sizeof(Transform));
	cb.previous = error_context_stack;
	cb.callback = expr_error_context;
	cb.arg = &tf->ctx;
	while (start < n)
	{
		volatile int cur = start;

		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
		PG_TRY();
		{
			error_context_stack = &cb;
			/* compiled in the first subtransaction: planning may raise too */
			if (!tf->compiled)
				compile(p, bt->target, tf);
			for (; cur < n; cur++)
				eval_row(tf, &bt->rows[sel[cur]], cxt);
			error_context_stack = cb.previous;
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
			start = n;
		}
		PG_CATCH();
		{
			ErrorData  *ed;
			const char *what = tf->ctx.what ? tf->ctx.what : "an expression";

			error_context_stack = cb.previous;
			MemoryContextSwitchTo(cxt);
			ed = CopyErrorData();
			FlushErrorState();
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
			if (!row_fault(ed->sqlerrcode))
				ReThrowError(ed);
			if (!tf->compiled)
			{
				/*
				 * A constant part raised as PostgreSQL folded it (1/0): the
				 * expression raises for every row, as each one's would have.
				 * Every row is quarantined, replayable once the pipeline's
				 * expression is altered; the pipeline goes on.
				 */
				char	   *detail = psprintf("%s raised when planned (a constant part of it raises for every message): %s",
											  what, ed->message);

				for (int i = 0; i < n; i++)
					expression_fault(&bt->rows[sel[i]], detail);
				FreeErrorData(ed);
				return;
			}
			expression_fault(&bt->rows[sel[cur]], psprintf("%s raised: %s", what, ed->message));
			FreeErrorData(ed);
			start = cur + 1;
		}
		PG_END_TRY();
	}
	for (int i = 0; i < n; i++)
		if (bt->rows[sel[i]].filtered)
		{
			batch->stats.filtered++;
			bt->stats.filtered++;
		}
	FreeExprContext(tf->econtext, true);
}

/* ---- the API's check ---- */

PG_FUNCTION_INFO_V1(kafka_sink_check_transform);

static bool
in_text_array(ArrayType *a, const char *name)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	if (a == NULL)
		return false;
	deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (!nulls[i] && strcmp(TextDatumGetCString(elems[i]), name) == 0)
			return true;
	return false;
}

/*
 * kafka_sink._check_transform(target regclass, mode text, key_columns
 * text[], order_column text, filter text, computed jsonb): raises unless
 * the filter (NULL: none) and the computed columns (NULL: none; else an
 * object of column -> expression text) pass the analysis against the
 * target's columns, as the caller (the pipeline's owner-to-be); target
 * NULL (a routed pipeline's, not named or not created yet): each
 * expression's text only.  Runs no expression.
 */
Datum
kafka_sink_check_transform(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_ARGISNULL(0) ? InvalidOid : PG_GETARG_OID(0);
	char	   *mode = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	ArrayType  *keys = PG_ARGISNULL(2) ? NULL : PG_GETARG_ARRAYTYPE_P(2);
	char	   *order = PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3));
	char	   *filter = PG_ARGISNULL(4) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(4));
	List	   *computed = NIL;
	KsMode		m;
	Relation	rel;
	TupleDesc	desc;
	KsExprColumn *cols;
	int			ncols = 0;
	Bitmapset  *pkey = NULL;

	if (mode == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("_check_transform needs a mode"),
				 errhint("The API calls it with the pipeline's target and mode.")));
	m = strcmp(mode, "history") == 0 ? KS_MODE_HISTORY : KS_MODE_MERGE;
	if (!PG_ARGISNULL(5))
	{
		Jsonb	   *jb = PG_GETARG_JSONB_P(5);
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;
		char	   *key = NULL;

		if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_IS_SCALAR(jb) || JB_ROOT_COUNT(jb) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("computed must be a non-empty JSON object of column names and SQL expressions"),
					 errhint("Pass computed => '{\"total\": \"price * quantity\"}'.")));
		it = JsonbIteratorInit(&jb->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (tok == WJB_KEY)
				key = pnstrdup(v.val.string.val, v.val.string.len);
			else if (tok == WJB_VALUE)
			{
				KsOption   *o = palloc0(sizeof(KsOption));

				if (v.type != jbvString)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("computed column \"%s\" must be given as the text of a SQL expression", key),
							 errhint("Pass computed => '{\"%s\": \"<expression>\"}'.", key)));
				o->name = key;
				o->value = pnstrdup(v.val.string.val, v.val.string.len);
				computed = lappend(computed, o);
			}
		}
	}

	if (!OidIsValid(relid))
	{
		/* routed, no table yet: the text only (each table at first use) */
		ks_transform_check(NULL, NULL, 0, filter, computed);
		PG_RETURN_VOID();
	}
	rel = table_open(relid, AccessShareLock);
	desc = RelationGetDescr(rel);
	/* no key_columns (a routed table): its primary key, as the worker keys it */
	if (keys == NULL)
		pkey = RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_PRIMARY_KEY);
	cols = palloc0(sizeof(KsExprColumn) * Max(desc->natts, 1));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		KsExprColumn *c;

		if (att->attisdropped || att->attgenerated ||
			att->attidentity == ATTRIBUTE_IDENTITY_ALWAYS)
			continue;
		c = &cols[ncols++];
		c->name = pstrdup(NameStr(att->attname));
		c->typid = att->atttypid;
		c->typmod = att->atttypmod;
		c->collation = att->attcollation;
		c->readable = !ks_column_written_by_sink(c->name, m);
		c->computable = c->readable && !in_text_array(keys, c->name) &&
			!bms_is_member(att->attnum - FirstLowInvalidHeapAttributeNumber, pkey) &&
			(order == NULL || strcmp(order, c->name) != 0);
	}
	ks_transform_check(quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												  RelationGetRelationName(rel)),
					   cols, ncols, filter, computed);
	table_close(rel, AccessShareLock);
	PG_RETURN_VOID();
}
