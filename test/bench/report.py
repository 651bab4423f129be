#!/usr/bin/env python3
"""report.py -- the benchmark's table, JSON and plot from run.sh's raw.tsv.

    report.py RAW_TSV OUT_DIR

Prints the table on stdout and writes OUT_DIR/results.md (the same table
in Markdown), OUT_DIR/results.json (every number), OUT_DIR/series-*.dat
(seconds since start, msgs/s over a trailing 2 s window, lag) and
OUT_DIR/throughput.png (gnuplot).
"""
import json
import os
import subprocess
import sys

WINDOW = 4.0        # seconds: the throughput curve's trailing window
STEP = 0.5          # seconds: the sampling interval


def load(raw):
    r = {}
    with open(raw) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or "\t" not in line:
                continue
            k, v = line.split("\t", 1)
            r[k] = v
    return r


def num(r, k, default=None):
    try:
        return float(r[k].split("\t")[0])
    except (KeyError, ValueError):
        return default


def read_samples(path):
    pts = []
    try:
        with open(path) as f:
            for line in f:
                a = line.split()
                if len(a) == 2:
                    pts.append((float(a[0]), float(a[1])))
    except OSError:
        pass
    return pts


def series(pts, t0, t1, total):
    """Step-function resampling every STEP s from t0, and a last point at
    t1 (the measured end, when everything was committed): (seconds since
    t0, msgs/s over the trailing WINDOW, lag)."""
    pts = sorted(p for p in pts if p[0] < t1) + [(t1, float(total))]
    out = []
    hist = []
    j = 0
    cur = 0.0
    times = []
    t = t0
    while t < t1:
        times.append(t)
        t += STEP
    times.append(t1)
    for t in times:
        while j < len(pts) and pts[j][0] <= t + 1e-9:
            cur = max(cur, pts[j][1])
            j += 1
        hist.append((t, cur))
        past = [(tt, c) for (tt, c) in hist if tt <= t - WINDOW + 1e-9]
        base_t, base_c = past[-1] if past else (t0, 0.0)
        rate = (cur - base_c) / max(t - base_t, STEP) if t > t0 else 0.0
        out.append((t - t0, rate, max(total - cur, 0)))
    return out


def fmt_int(x):
    return "-" if x is None else "{:,.0f}".format(x)


def fmt(x, spec="{:.2f}"):
    return "-" if x is None else spec.format(x)


def per_cpu(cpu_s_per_million):
    """messages per CPU second, from CPU seconds per 1M messages"""
    return fmt_int(1e6 / cpu_s_per_million) if cpu_s_per_million else ""


def cdc_rows(r):
    """the CDC part (test/bench/cdc_part.sh): ours and the Debezium JDBC sink
    on the same change topics; (lines of the table, results)"""
    n = num(r, "cdc.messages")
    if not n:
        return [], None
    res = {"messages": int(n), "rows_per_table_initially": num(r, "cdc.rows"), "operations": num(r, "cdc.ops"),
           "source_rows_at_end": num(r, "cdc.source_rows"), "message_bytes": num(r, "cdc.message_bytes")}
    for key, name in (("cdc_ks", "ours"), ("cdc_dbz", "debezium_jdbc")):
        s_ = num(r, key + ".seconds")
        if not s_:
            continue
        res[name] = {"seconds": s_, "msgs_per_s": n / s_, "cpu_s": num(r, key + ".cpu_s"),
                     "cpu_s_per_million": num(r, key + ".cpu_s") / n * 1e6 if num(r, key + ".cpu_s") else None,
                     "rss_mib": num(r, key + ".rss_kb", 0) / 1024 or None,
                     "startup_seconds": num(r, key + ".startup_seconds"),
                     "batches": num(r, key + ".batches"), "quarantined": num(r, key + ".quarantined"),
                     "equal_to_source": r.get(key + ".equal"), "load_at_start": num(r, key + ".load"),
                     "machine_busy_s": num(r, key + ".machine_busy_s")}
    o, d = res.get("ours"), res.get("debezium_jdbc")
    if o and d:
        res["ours_vs_debezium_jdbc"] = o["msgs_per_s"] / d["msgs_per_s"]
    lines = ["CDC: %s Debezium change events (snapshot of 3 x %s rows + %s operations: inserts, updates, deletes with "
             "tombstones, key changes, truncates; schema-embedded JSON, ~%s bytes) from PostgreSQL through Debezium's "
             "PostgreSQL connector, replicated into 3 tables"
             % (fmt_int(n), fmt_int(res["rows_per_table_initially"]), fmt_int(res["operations"]),
                fmt_int(res["message_bytes"])), "",
             "| CDC run | seconds | msgs/s | / Debezium JDBC sink | CPU s per 1M msgs | msgs per CPU s | peak RSS MiB "
             "| equal to the source (cdc_compare.py) | load avg at start |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for name, label in (("ours", "ours: one pipeline, envelope => 'debezium', target => 'bench_cdc.{source.table}', "
                                  "max_offsets_per_batch 50000 (worker CPU)"),
                        ("debezium_jdbc", "peer: Kafka Connect + Debezium JDBC sink (upsert, delete.enabled, "
                                          "truncate.enabled; JVM start included; the JVM's CPU)")):
        x = res.get(name)
        if not x:
            lines.append("| %s | not run (see bench.log) | | | | | | | |" % label)
            continue
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, fmt(x["seconds"], "{:.1f}"), fmt_int(x["msgs_per_s"]),
            fmt(x["msgs_per_s"] / d["msgs_per_s"]) if d else "-",
            fmt(x["cpu_s_per_million"], "{:.1f}"), per_cpu(x["cpu_s_per_million"]),
            fmt(x["rss_mib"], "{:.0f}"), x["equal_to_source"],
            fmt(x["load_at_start"])))
    lines.append("")
    return lines, res


def per_core(res, cdc_res):
    """the per-core figure: messages into PostgreSQL per worker CPU second,
    exactly once, apply included, one worker, per format and mode"""
    rows = []
    for key, label in (("m100k", "JSON, merge (100000 per batch)"), ("avro", "Avro, merge (50000)"),
                       ("protobuf", "Protobuf, merge (50000)"), ("hist", "JSON, mode history (100000)")):
        d = res["runs"].get(key)
        if d and d.get("worker_cpu_s_per_million"):
            rows.append((label, d["worker_cpu_s_per_million"], d["same_as_baseline"]))
    o = (cdc_res or {}).get("ours")
    if o and o.get("cpu_s_per_million"):
        rows.append(("Debezium change events, routed to 3 tables (50000)", o["cpu_s_per_million"],
                     o["equal_to_source"]))
    if not rows:
        return []
    m = res.get("machine", {})
    lines = ["Per core: messages into PostgreSQL per worker CPU second (utime + stime of the one worker, "
             "librdkafka's threads included), exactly once, decode and apply included; %s cores (%s)"
             % (m.get("cores"), m.get("cpu")), "",
             "| workload | msgs per worker CPU s | worker CPU s per 1M msgs | result checked |",
             "|---|---:|---:|---|"]
    for label, c, ok in rows:
        lines.append("| %s | %s | %s | %s |" % (label, per_cpu(c), fmt(c, "{:.1f}"), ok))
    lines.append("")
    res["per_core"] = {label: 1e6 / c for label, c, _ in rows}
    return lines


def write_out(out, text, res):
    print(text)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=2)


def main():
    raw, out = sys.argv[1], sys.argv[2]
    r = load(raw)
    cdc_lines, cdc_res = cdc_rows(r)
    if "events" not in r:           # KS_BENCH_PARTS=cdc: the CDC rows only
        res = {"cdc": cdc_res, "machine": {k[8:]: v for k, v in r.items() if k.startswith("machine.")},
               "total_seconds": num(r, "total_seconds")}
        m = res["machine"]
        write_out(out, "\n".join(["machine: %s cores (%s), %s; PostgreSQL %s, librdkafka %s, Kafka %s; commit %s"
                                   % (m.get("cores"), m.get("cpu"), m.get("mem"), m.get("postgres"),
                                      m.get("librdkafka"), m.get("kafka"), m.get("commit")), ""] + cdc_lines), res)
        return
    n = int(num(r, "events"))
    res = {"events": n, "distinct_keys": int(num(r, "distinct_keys", 0)),
           "message_bytes": num(r, "message_bytes"), "machine": {}, "runs": {}, "latency": {}}
    for k, v in r.items():
        if k.startswith("machine."):
            res["machine"][k[8:]] = v

    # throughput runs: each configuration ran in rounds ("m50k.r1", ...);
    # the fastest round counts, every round's seconds are kept
    def best(base):
        reps = {}
        for k in r:
            parts = k.split(".")
            if len(parts) == 3 and parts[0] == base and parts[1].startswith("r") and parts[2] == "seconds":
                reps[parts[0] + "." + parts[1]] = num(r, k)
        if not reps:
            return None, []
        p = min(reps, key=reps.get)
        return p, [reps[x] for x in sorted(reps)]

    prefixes = {}
    p, alls = best("baseline")
    prefixes["baseline"] = p
    base_s = num(r, p + ".seconds") if p else None
    base_rate = n / base_s if base_s else None
    res["runs"]["baseline"] = {"seconds": base_s, "msgs_per_s": base_rate, "all_seconds": alls,
                               "machine_busy_s": num(r, p + ".machine_busy_s") if p else None,
                               "load_at_start": num(r, p + ".load") if p else None,
                               "backend_cpu_s": num(r, p + ".backend_cpu_s") if p else None}
    # the text-key runs' own baseline: the same script with order_id text
    p, alls = best("baseline_text")
    prefixes["baseline_text"] = p
    base_text_s = num(r, p + ".seconds") if p else None
    base_text_rate = n / base_text_s if base_text_s else None
    if p:
        res["runs"]["baseline_text"] = {"seconds": base_text_s, "msgs_per_s": base_text_rate, "all_seconds": alls,
                                        "load_at_start": num(r, p + ".load"),
                                        "backend_cpu_s": num(r, p + ".backend_cpu_s")}
    bcpu = res["runs"]["baseline"]["backend_cpu_s"]
    res["runs"]["baseline"]["backend_cpu_s_per_million"] = bcpu / n * 1e6 if bcpu is not None else None
    p, alls = best("py")
    prefixes["py"] = p
    py = None
    if p:
        py = {"t0": num(r, p + ".t0"), "seconds": num(r, p + ".seconds"), "batches": num(r, p + ".batches")}
        py["t1"] = py["t0"] + py["seconds"]
        res["runs"]["python"] = {"seconds": py["seconds"], "msgs_per_s": n / py["seconds"], "all_seconds": alls,
                                 "batches": py["batches"],
                                 "machine_busy_s": num(r, p + ".machine_busy_s"),
                                 "load_at_start": num(r, p + ".load"),
                                 "same_as_baseline": r.get(p + ".same_as_baseline")}
    py_rate = res["runs"]["python"]["msgs_per_s"] if py else None
    p, alls = best("dbz")
    prefixes["dbz"] = p
    if p:
        s_ = num(r, p + ".seconds")
        res["runs"]["debezium"] = {"seconds": s_, "msgs_per_s": n / s_ if s_ else None, "all_seconds": alls,
                                   "startup_seconds": num(r, p + ".startup_seconds"),
                                   "rows_differing_from_rule": num(r, p + ".rows_differing_from_rule"),
                                   "rows_differing_from_last_offset": num(r, p + ".rows_differing_from_last_offset"),
                                   "cpu_s": num(r, p + ".cpu_s"), "rss_kb": num(r, p + ".rss_kb"),
                                   "message_bytes": num(r, p + ".message_bytes"),
                                   "load_at_start": num(r, p + ".load"),
                                   "same_as_baseline": r.get(p + ".same_as_baseline")}
    for key in ("m50k", "m100k", "m100k_text", "m100k_sql", "hist", "softdel", "insert_only", "update_only",
                "bronze", "w2", "w1p16", "w2p16", "w4p16", "avro", "avro_text", "protobuf", "tk1", "tk2"):
        p, alls = best(key)
        prefixes[key] = p
        if not p:
            continue
        s = num(r, p + ".seconds")
        cpu = num(r, p + ".cpu_s")
        # text keys are measured against the text-key baseline
        rate0 = base_text_rate if key in ("tk1", "tk2") else base_rate
        d = {"seconds": s, "msgs_per_s": n / s, "all_seconds": alls,
             "vs_baseline": (n / s) / rate0 if rate0 else None,
             "vs_python": (n / s) / py_rate if py_rate else None,
             "worker_cpu_s": cpu,
             "worker_cpu_s_per_million": cpu / n * 1e6 if cpu is not None else None,
             "worker_peak_rss_mib": num(r, p + ".rss_kb", 0) / 1024 or None,
             "batches": num(r, p + ".batches"),
             "wall_in_batches_s": num(r, p + ".batch_s"),
             "phase_ms": {ph: num(r, "%s.%s_ms" % (p, ph)) for ph in ("fetch", "decode", "apply", "commit")},
             "machine_busy_s": num(r, p + ".machine_busy_s"),
             "load_at_start": num(r, p + ".load"),
             "same_as_baseline": r.get(p + ".same_as_baseline"),
             "max_offsets_per_batch": num(r, p + ".max_offsets"),
             "bronze_rows": num(r, p + ".bronze_rows"),
             "workers": num(r, p + ".workers"),
             "apply_rows": {k: num(r, "%s.%s_rows" % (p, k)) for k in ("heap", "sql")}}
        res["runs"][key] = d
    for key in ("lat", "lat_bronze"):
        if key + ".rows" not in r:
            continue
        prod = {}
        if key + ".producer" in r and os.path.exists(r[key + ".producer"]):
            with open(r[key + ".producer"]) as f:
                prod = json.load(f)
        cpu = num(r, key + ".cpu_s")
        rows_ = num(r, key + ".rows")
        res["latency"][key] = {
            "messages": rows_, "producer_rate": prod.get("rate"), "producer_errors": prod.get("errors"),
            "producer_ack_ms_p50": prod.get("ack_ms_p50"), "producer_ack_ms_p99": prod.get("ack_ms_p99"),
            **{m: num(r, "%s.%s" % (key, m)) for m in
               ("p50_written_ms", "p99_written_ms", "max_written_ms",
                "p50_committed_ms", "p99_committed_ms", "max_committed_ms", "batch_ms_avg",
                "batch_ms_p50", "batch_ms_p99", "batch_ms_max", "decode_apply_ms_avg", "decode_apply_ms_max")},
            "p99_written_ms_by_5s": [float(x) for x in r.get(key + ".p99_written_ms_by_5s", "").split()],
            "trigger_interval": r.get(key + ".trigger_interval", "100 ms"),
            "batches": num(r, key + ".batches"),
            "avg_batch_messages": float(r[key + ".batches"].split("\t")[1]) if key + ".batches" in r else None,
            "worker_cpu_s": cpu,
            # the worker's CPU covers the warm-up too
            "worker_cpu_s_per_million": cpu / prod.get("all_messages", rows_) * 1e6 if cpu and rows_ else None,
            "worker_peak_rss_mib": num(r, key + ".rss_kb", 0) / 1024 or None,
            "warmup_messages": prod.get("warmup_messages"),
            "load_at_start": num(r, key + ".load")}
    res["profile"] = {"command": r.get("profile.command"), "committed": num(r, "profile.committed")}
    res["total_seconds"] = num(r, "total_seconds")
    res["produce_seconds"] = num(r, "produce_seconds")

    # ---- the table
    m = res["machine"]
    lines = []
    lines.append("kafka_sink benchmark: %s events over %s order ids (~%d-byte JSON values), 4 partitions"
                 % (fmt_int(n), fmt_int(res["distinct_keys"]), res["message_bytes"] or 0))
    lines.append("machine: %s cores (%s), %s, kernel %s; PostgreSQL %s, librdkafka %s, Kafka %s; commit %s"
                 % (m.get("cores"), m.get("cpu"), m.get("mem"), m.get("kernel"), m.get("postgres"),
                    m.get("librdkafka"), m.get("kafka"), m.get("commit")))
    lines.append("")
    hdr = ("| run | seconds (fastest round) | msgs/s | ours / baseline | ours / python | worker CPU s per 1M msgs "
           "| msgs per worker CPU s | worker peak RSS MiB | batches | same rows as baseline | load avg at start "
           "| seconds, every round |")
    lines.append(hdr)
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")

    def rounds(d):
        return " / ".join("%.1f" % x for x in d.get("all_seconds", []))
    b = res["runs"]["baseline"]
    lines.append("| baseline: psql COPY + DISTINCT ON + MERGE, 50k per txn (CPU: its backend) | %s | %s | 1.00 | | %s | %s | | %s | (reference) | %s | %s |"
                 % (fmt(b["seconds"], "{:.1f}"), fmt_int(b["msgs_per_s"]),
                    fmt(b.get("backend_cpu_s_per_million"), "{:.1f}"), per_cpu(b.get("backend_cpu_s_per_million")),
                    fmt_int(-(-n // 50000)),
                    fmt(b["load_at_start"]), rounds(b)))
    bt = res["runs"].get("baseline_text")
    if bt:
        btc = bt.get("backend_cpu_s")
        lines.append("| baseline with order_id text (the text-key runs' reference) | %s | %s | %s | | %s | %s | | %s | (reference) | %s | %s |"
                     % (fmt(bt["seconds"], "{:.1f}"), fmt_int(bt["msgs_per_s"]),
                        fmt(bt["msgs_per_s"] / b["msgs_per_s"] if b["msgs_per_s"] else None),
                        fmt(btc / n * 1e6 if btc is not None else None, "{:.1f}"),
                        per_cpu(btc / n * 1e6 if btc else None), fmt_int(-(-n // 50000)),
                        fmt(bt["load_at_start"]), rounds(bt)))
    for key, label in (("m50k", "ours, max_offsets_per_batch 50000"),
                       ("m100k", "ours, max_offsets_per_batch 100000 (default)"),
                       ("m100k_text", "ours, 100000, kafka_sink.direct_values off (timestamps through timestamptz_in)"),
                       ("m100k_sql", "ours, 100000, kafka_sink.apply_strategy sql (the MERGE for every target)"),
                       ("hist", "ours, 100000, mode history (every version; same rows: its current versions)"),
                       ("softdel", "ours, 100000, delete_mode soft (same rows: its live rows)"),
                       ("insert_only", "ours, 100000, write_mode insert_only (same rows: the first event of each key)"),
                       ("update_only", "ours, 100000, write_mode update_only (even keys there before; same rows: the baseline's even keys)"),
                       ("bronze", "ours, 50000, bronze on"),
                       ("w2", "ours, 100000, workers 2 (worker CPU: both)"),
                       ("w1p16", "ours, 100000, 16 partitions, workers 1"),
                       ("w2p16", "ours, 100000, 16 partitions, workers 2 (CPU: both)"),
                       ("w4p16", "ours, 100000, 16 partitions, workers 4 (CPU: all four)"),
                       ("avro", "ours, 50000, the same events as Avro (schema registry)"),
                       ("avro_text", "ours, 50000, Avro with kafka_sink.direct_values off (every value through its text)"),
                       ("protobuf", "ours, 50000, the same events as Protobuf (schema registry)"),
                       ("tk1", "ours, 100000, order_id text, workers 1 (against the text-key baseline)"),
                       ("tk2", "ours, 100000, order_id text, workers 2 (against the text-key baseline; CPU: both)")):
        d = res["runs"].get(key)
        if not d:
            continue
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, fmt(d["seconds"], "{:.1f}"), fmt_int(d["msgs_per_s"]), fmt(d["vs_baseline"]),
            fmt(d["vs_python"]), fmt(d["worker_cpu_s_per_million"], "{:.1f}"), per_cpu(d["worker_cpu_s_per_million"]),
            fmt(d["worker_peak_rss_mib"], "{:.0f}"), fmt_int(d["batches"]), d["same_as_baseline"],
            fmt(d["load_at_start"]), rounds(d)))
    if py:
        d = res["runs"]["python"]
        lines.append("| peer: Python consumer (confluent-kafka + psycopg 3), 50k per batch | %s | %s | %s | 1.00 | | | | %s | %s | %s | %s |"
                     % (fmt(d["seconds"], "{:.1f}"), fmt_int(d["msgs_per_s"]),
                        fmt(d["msgs_per_s"] / base_rate if base_rate else None),
                        fmt_int(d["batches"]), d["same_as_baseline"], fmt(d["load_at_start"]), rounds(d)))
    d = res["runs"].get("debezium")
    if d and d["seconds"]:
        lines.append("| peer: Kafka Connect + Debezium JDBC sink, upsert, batch.size 50000 (schema-embedded JSON, ~%d-byte messages; JVM start %s s included; the connector's JVM CPU s per 1M msgs) | %s | %s | %s | %s | %s | %s | %s | | %s | %s | %s |"
                     % (d["message_bytes"] or 0, fmt(d["startup_seconds"], "{:.1f}"),
                        fmt(d["seconds"], "{:.1f}"), fmt_int(d["msgs_per_s"]),
                        fmt(d["msgs_per_s"] / base_rate if base_rate else None),
                        fmt(d["msgs_per_s"] / py_rate if py_rate else None),
                        fmt(d["cpu_s"] / n * 1e6 if d["cpu_s"] else None, "{:.1f}"),
                        per_cpu(d["cpu_s"] / n * 1e6 if d["cpu_s"] else None),
                        fmt(d["rss_kb"] / 1024 if d["rss_kb"] else None, "{:.0f}"),
                        "no: %s rows break the ordering rule (last offset wins)" % fmt_int(d["rows_differing_from_rule"])
                        if d["rows_differing_from_rule"] else d["same_as_baseline"],
                        fmt(d["load_at_start"]), rounds(d)))
    else:
        lines.append("| peer: Kafka Connect + Debezium JDBC sink | not run (BENCH_DEBEZIUM=0, or it failed: see bench.log) | | | | | | | | | | |")
    lines.append("")
    if res["latency"]:
        trig = next(iter(res["latency"].values())).get("trigger_interval", "100 ms")
        lines.append("| latency run (unique keys, trigger_interval " + trig + ") | produced msgs/s | messages "
                     "| p50 ms (written) | p99 ms (written) | p50 ms (committed) | p99 ms (committed) "
                     "| max ms (committed) | avg batch | worker CPU s per 1M msgs | worker peak RSS MiB |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for key, label in (("lat", "bronze off"), ("lat_bronze", "bronze on")):
            d = res["latency"].get(key)
            if not d:
                continue
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                label, fmt_int(d["producer_rate"]), fmt_int(d["messages"]),
                fmt(d["p50_written_ms"], "{:.0f}"), fmt(d["p99_written_ms"], "{:.0f}"),
                fmt(d["p50_committed_ms"], "{:.0f}"), fmt(d["p99_committed_ms"], "{:.0f}"),
                fmt(d["max_committed_ms"], "{:.0f}"), fmt_int(d["avg_batch_messages"]),
                fmt(d["worker_cpu_s_per_million"], "{:.1f}"), fmt(d["worker_peak_rss_mib"], "{:.0f}")))
        for key, label in (("lat", "bronze off"), ("lat_bronze", "bronze on")):
            d = res["latency"].get(key)
            if d and d.get("batch_ms_p50") is not None:
                lines.append("latency run, %s: batch started->committed p50 %.0f ms, p99 %.0f ms, max %.0f ms; "
                             "decode+apply avg %.0f ms, max %.0f ms; producer ack p50 %s ms, p99 %s ms"
                             % (label, d["batch_ms_p50"], d["batch_ms_p99"], d["batch_ms_max"],
                                d["decode_apply_ms_avg"], d["decode_apply_ms_max"],
                                d["producer_ack_ms_p50"], d["producer_ack_ms_p99"]))
                lines.append("latency run, %s: p99 ms (written) per 5 s of the run: %s"
                             % (label, " ".join("%.0f" % x for x in d["p99_written_ms_by_5s"])))
        lines.append("")
    # the goals of the performance issues, each with its measured value (ratios of this run)
    t = []
    R = res["runs"]

    def verdict(ok):
        return "met" if ok else "NOT met"

    def vb(k):
        return R[k]["vs_baseline"] if k in R and R[k].get("vs_baseline") is not None else None
    one = [k for k in ("m50k", "m100k") if vb(k) is not None]
    if one:
        k1 = max(one, key=vb)
        t.append("- one worker >= 1.2x the baseline: %s (50k %s, 100k %s): %s"
                 % (fmt(vb(k1)), fmt(vb("m50k")), fmt(vb("m100k")), verdict(vb(k1) >= 1.2)))
    if vb("bronze") is not None:
        t.append("- bronze on >= 1.0x the baseline: %s: %s" % (fmt(vb("bronze")), verdict(vb("bronze") >= 1.0)))
    if vb("tk1") is not None or vb("tk2") is not None:
        t.append("- text keys (issue 29), against the text-key baseline: one worker >= 1.3x: %s: %s; workers 2 >= 1.6x: %s: %s"
                 % (fmt(vb("tk1")), verdict(vb("tk1") is not None and vb("tk1") >= 1.3),
                    fmt(vb("tk2")), verdict(vb("tk2") is not None and vb("tk2") >= 1.6)))
    w2 = [k for k in ("w2", "w2p16") if vb(k) is not None]
    if w2:
        k2 = max(w2, key=vb)
        t.append("- workers 2 >= 1.5x the baseline: %s (4 partitions %s, 16 partitions %s): %s"
                 % (fmt(vb(k2)), fmt(vb("w2")), fmt(vb("w2p16")), verdict(vb(k2) >= 1.5)))
    if vb("w4p16") is not None and vb("w2p16") is not None:
        t.append("- workers 4 on 16 partitions no slower than workers 2: %s vs %s (workers 1: %s): %s"
                 % (fmt(vb("w4p16")), fmt(vb("w2p16")), fmt(vb("w1p16")), verdict(vb("w4p16") >= vb("w2p16"))))
    # a peer's ratio: one worker's, and the best of two workers' (4 or 16
    # partitions); "met with two workers" when only the second reaches it
    def peer_goal(rate, goal):
        best1 = max(R[k]["msgs_per_s"] for k in one) / rate
        w2s = [R[k]["msgs_per_s"] / rate for k in ("w2", "w2p16") if k in R and R[k].get("msgs_per_s")]
        best2 = max(w2s) if w2s else None
        if best1 >= goal:
            v = "met"
        elif best2 is not None and best2 >= goal:
            v = "met with two workers, not with one"
        else:
            v = "NOT met"
        return "%s (one worker; workers 2: %s): %s" % (fmt(best1), fmt(best2) if best2 is not None else "-", v)
    if py_rate and one:
        t.append("- >= 3x the Python consumer: " + peer_goal(py_rate, 3))
    dz = R.get("debezium")
    if dz and dz.get("msgs_per_s") and one:
        t.append("- >= 10x Kafka Connect + Debezium JDBC sink: " + peer_goal(dz["msgs_per_s"], 10))
    for key, label in (("lat", ""), ("lat_bronze", ", bronze on")):
        d = res["latency"].get(key)
        if d and d["p99_written_ms"] is not None:
            t.append("- p99 <= 100 ms written at %s msgs/s%s, trigger_interval %s: %.0f ms (committed %.0f ms): %s"
                     % (fmt_int(d["producer_rate"]), label, d.get("trigger_interval", "100 ms"), d["p99_written_ms"],
                        d["p99_committed_ms"], verdict(d["p99_written_ms"] <= 100)))
    bcpu = R["baseline"].get("backend_cpu_s_per_million")
    cpus = [(k, R[k]["worker_cpu_s_per_million"]) for k in ("m50k", "m100k") if k in R and R[k].get("worker_cpu_s_per_million")]
    if cpus and bcpu:
        kc, c = min(cpus, key=lambda x: x[1])
        t.append("- worker CPU s per 1M msgs <= the baseline backend's: %.1f (%s) vs %.1f: %s"
                 % (c, kc, bcpu, verdict(c <= bcpu)))
    rss = [(k, R[k]["worker_peak_rss_mib"]) for k in R if isinstance(R[k], dict) and R[k].get("worker_peak_rss_mib")]
    if rss:
        t.append("- peak RSS (MiB, largest worker): " + ", ".join("%s %.0f" % (k, v) for k, v in rss))
    if vb("m100k") is not None and vb("m100k_text") is not None:
        t.append("  (JSON timestamps built directly vs through timestamptz_in: %s vs %s the baseline, worker CPU s per 1M %s vs %s)"
                 % (fmt(vb("m100k")), fmt(vb("m100k_text")), fmt(R["m100k"]["worker_cpu_s_per_million"], "{:.1f}"),
                    fmt(R["m100k_text"]["worker_cpu_s_per_million"], "{:.1f}")))
    if vb("m100k") is not None and vb("m100k_sql") is not None:
        ar = R["m100k"].get("apply_rows") or {}
        t.append("  (the default apply strategy vs the MERGE alone: %s vs %s the baseline, worker CPU s per 1M %s vs %s, "
                 "apply ms %s vs %s; in the default run rows applied by the heap strategy %s, by the MERGE %s)"
                 % (fmt(vb("m100k")), fmt(vb("m100k_sql")),
                    fmt(R["m100k"]["worker_cpu_s_per_million"], "{:.1f}"),
                    fmt(R["m100k_sql"]["worker_cpu_s_per_million"], "{:.1f}"),
                    fmt_int(R["m100k"]["phase_ms"]["apply"]), fmt_int(R["m100k_sql"]["phase_ms"]["apply"]),
                    fmt_int(ar.get("heap")), fmt_int(ar.get("sql"))))
    if vb("avro") is not None and vb("avro_text") is not None:
        t.append("  (Avro values built directly vs through their text: %s vs %s the baseline, worker CPU s per 1M %s vs %s)"
                 % (fmt(vb("avro")), fmt(vb("avro_text")), fmt(R["avro"]["worker_cpu_s_per_million"], "{:.1f}"),
                    fmt(R["avro_text"]["worker_cpu_s_per_million"], "{:.1f}")))
    if vb("avro") is not None and vb("m50k") is not None:
        ratio = R["avro"]["msgs_per_s"] / R["m50k"]["msgs_per_s"]
        t.append("- the Avro row at the level of JSON (50k): %s of JSON's msgs/s (%sx vs %sx the baseline): %s"
                 % (fmt(ratio), fmt(vb("avro")), fmt(vb("m50k")), verdict(ratio >= 0.9)))
    if vb("protobuf") is not None and vb("avro") is not None:
        ratio = R["protobuf"]["msgs_per_s"] / R["avro"]["msgs_per_s"]
        t.append("- the Protobuf row at the level of Avro (50k): %s of Avro's msgs/s (%sx vs %sx the baseline), "
                 "worker CPU s per 1M %s vs %s: %s"
                 % (fmt(ratio), fmt(vb("protobuf")), fmt(vb("avro")),
                    fmt(R["protobuf"]["worker_cpu_s_per_million"], "{:.1f}"),
                    fmt(R["avro"]["worker_cpu_s_per_million"], "{:.1f}"), verdict(ratio >= 0.9)))
    if t:
        lines.append("goals (reported, not asserted; ratios within this run only):")
        lines.extend(t)
        lines.append("")
    for key, label in (("m50k", "50k"), ("m100k", "100k"), ("bronze", "bronze"), ("w2", "100k, 2 workers; summed over both"),
                       ("w2p16", "100k, 16 partitions, 2 workers; summed"), ("w4p16", "100k, 16 partitions, 4 workers; summed"),
                       ("avro", "Avro, 50k"), ("protobuf", "Protobuf, 50k")):
        d = res["runs"].get(key)
        if d and d["phase_ms"].get("apply") is not None:
            ph = d["phase_ms"]
            tot = d["seconds"]
            lines.append("wall time of ours (%s), summed over batches: fetch %.1f s, decode %.1f s, apply %.1f s, "
                         "commit %.1f s (of %.1f s end to end)"
                         % (label, (ph["fetch"] or 0) / 1000, (ph["decode"] or 0) / 1000,
                            (ph["apply"] or 0) / 1000, (ph["commit"] or 0) / 1000, tot))
    lines.extend(cdc_lines)
    res["cdc"] = cdc_res
    lines.extend(per_core(res, cdc_res))
    write_out(out, "\n".join(lines), res)

    # ---- the plot
    plot = []
    for key, label in (("baseline", "baseline (psql COPY+MERGE)"), ("m50k", "ours, 50k/batch"),
                       ("m100k", "ours, 100k/batch"), ("bronze", "ours, 50k/batch, bronze"),
                       ("w2", "ours, 100k/batch, 2 workers"), ("py", "Python consumer")):
        p = prefixes.get(key)
        if not p or num(r, p + ".t0") is None:
            continue
        samples = r.get(p + ".samples")
        t0 = num(r, p + ".t0")
        t1 = t0 + num(r, p + ".seconds")
        s = series(read_samples(samples), t0, t1, n)
        path = os.path.join(out, "series-%s.dat" % key)
        with open(path, "w") as f:
            f.write("# seconds_since_start msgs_per_s_trailing_%gs lag_messages\n" % WINDOW)
            for (a, bb, c) in s:
                f.write("%.2f %.0f %.0f\n" % (a, bb, c))
        plot.append((path, label))
    if plot:
        gp = os.path.join(out, "throughput.gp")
        png = os.path.join(out, "throughput.png")
        with open(gp, "w") as f:
            f.write('set terminal pngcairo noenhanced size 1100,800 font ",10"\n')
            f.write('set output "%s"\n' % png)
            f.write("set multiplot layout 2,1 title \"kafka_sink vs baseline: %s events, %s keys, 4 partitions "
                    "(%s cores)\"\n" % (fmt_int(n), fmt_int(res["distinct_keys"]), m.get("cores")))
            f.write("set grid\nset key outside right top\nset xlabel \"seconds since start\"\n")
            f.write('set ylabel "msgs/s committed (trailing %gs)"\nset format y "%%.0s%%c"\n' % WINDOW)
            f.write("plot " + ", ".join('"%s" using 1:2 with lines lw 2 title "%s"' % (p, l) for p, l in plot) + "\n")
            f.write('set ylabel "lag (messages not yet committed)"\nset format y "%.1s%c"\n')
            f.write("plot " + ", ".join('"%s" using 1:3 with lines lw 2 title "%s"' % (p, l) for p, l in plot) + "\n")
            f.write("unset multiplot\n")
        rc = subprocess.call(["gnuplot", gp])
        if rc != 0:
            print("gnuplot failed (%d)" % rc, file=sys.stderr)


if __name__ == "__main__":
    main()
