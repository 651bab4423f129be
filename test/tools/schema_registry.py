#!/usr/bin/env python3
"""A small Confluent-compatible Schema Registry for the tests.

Serves the part of the Confluent Schema Registry REST API that the
Confluent clients (confluent-kafka's SchemaRegistryClient, AvroSerializer,
JSONSerializer) and kafka_sink use:

  POST /subjects/{subject}/versions      register  -> {"id": N}
  POST /subjects/{subject}               look a schema up under a subject
  GET  /schemas/ids/{id}                 -> {"schema": "...", "schemaType"?}
  GET  /schemas/ids/{id}/versions        -> [{"subject", "version"}]
  GET  /subjects                         -> ["a-value", ...]
  GET  /subjects/{subject}/versions      -> [1, 2, ...]
  GET  /subjects/{subject}/versions/{v}  v a number or "latest"
  DELETE /subjects/{subject}             -> [versions]
  GET/PUT /config, /config/{subject}     compatibility (stored, not enforced)

with HTTP basic auth when --user is given (401 otherwise), and errors as
Confluent's: {"error_code": 40401, "message": "..."} (subject not found),
40402 (version not found), 40403 (schema not found), 42201 (invalid schema).

Schema ids are global and one per distinct schema (the same schema under
two subjects has one id), as in Confluent's.  State is kept in --state (a
JSON file) so that a restarted registry serves the same ids.

A Protobuf schema registered as a base64 FileDescriptorProto (what
confluent-kafka's ProtobufSerializer sends) is stored and served as .proto
text, as Confluent's registry does (proto_text below, no dependency).

For outage tests, without auth and from loopback only:
  POST /_control {"mode": "ok" | "error" | "hang"}
    error: every API request answers 503; hang: every API request waits
    60 s before answering 503 (for client timeouts).
  GET /_control -> {"mode": ..., "requests": N, "by_path": {...}}
The requests counter counts API requests (not /_control), so a test can
show that a consumer no longer calls the registry.

Usage: schema_registry.py --port P [--host 127.0.0.1] [--state FILE]
                          [--user USER:PASSWORD] [--port-file FILE]
--port 0 picks a free port, written to --port-file once listening.
"""
import argparse
import base64
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

LOCK = threading.Lock()
STATE = {"schemas": [], "subjects": {}, "config": {"compatibility": "BACKWARD"}, "subject_config": {}}
CONTROL = {"mode": "ok", "requests": 0, "by_path": {}}
ARGS = None

KNOWN_TYPES = ("AVRO", "JSON", "PROTOBUF")


def save():
    if not ARGS.state:
        return
    tmp = ARGS.state + ".tmp"
    with open(tmp, "w") as f:
        json.dump(STATE, f)
    os.replace(tmp, ARGS.state)


def load():
    if ARGS.state and os.path.exists(ARGS.state):
        with open(ARGS.state) as f:
            STATE.update(json.load(f))


# ---- Protobuf: a serialized FileDescriptorProto -> .proto text ----------------------

def _pb_fields(b):
    """field number -> list of values (ints for varints and fixed, bytes for the rest)"""
    out, i = {}, 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return v
    while i < len(b):
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            v = varint()
        elif wt == 1:
            v = int.from_bytes(b[i:i + 8], "little")
            i += 8
        elif wt == 5:
            v = int.from_bytes(b[i:i + 4], "little")
            i += 4
        elif wt == 2:
            n = varint()
            v = b[i:i + n]
            i += n
        else:
            raise ValueError("wire type %d in a descriptor" % wt)
        out.setdefault(num, []).append(v)
    return out


def _s(f, n, default=""):
    return f[n][-1].decode() if n in f else default


def _i32(v):
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= 1 << 63 else v


_PB_TYPES = {1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
             8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
             17: "sint32", 18: "sint64"}


def _pb_enum(e, ind):
    e = _pb_fields(e)
    vals = ["%s  %s = %d;\n" % (ind, _s(v, 1), _i32(v.get(2, [0])[-1])) for v in map(_pb_fields, e.get(2, []))]
    return "%senum %s {\n%s%s}\n" % (ind, _s(e, 1), "".join(vals), ind)


def _pb_field(f, proto3, label_ok=True):
    t = _PB_TYPES.get(f.get(5, [0])[-1]) or _s(f, 6)
    label = {1: "optional ", 2: "required ", 3: "repeated "}.get(f.get(4, [1])[-1], "")
    if proto3 and label == "optional " and not f.get(17, [0])[-1]:
        label = ""
    if not label_ok:
        label = ""
    opts = ""
    if 8 in f and 2 in _pb_fields(f[8][-1]):
        opts = " [packed = %s]" % ("true" if _pb_fields(f[8][-1])[2][-1] else "false")
    return "%s%s %s = %d%s;" % (label, t, _s(f, 1), f[3][-1], opts)


def _pb_message(m, ind, proto3):
    m = _pb_fields(m)
    name = _s(m, 1)
    nested = [_pb_fields(n) for n in m.get(3, [])]
    entries = {}
    for n in nested:
        if 7 in n and 7 in _pb_fields(n[7][-1]) and _pb_fields(n[7][-1])[7][-1]:
            entries[_s(n, 1)] = n
    oneofs = [_s(_pb_fields(o), 1) for o in m.get(8, [])]
    fields = [_pb_fields(f) for f in m.get(2, [])]
    lines = []
    done = set()
    # nested types in their order (a map entry where its field is), so that
    # the text parsed again has the same nested_type order (message indexes)
    for n in nested:
        nname = _s(n, 1)
        if nname in entries:
            for k, f in enumerate(fields):
                if _s(f, 6).split(".")[-1] == nname and f.get(4, [1])[-1] == 3:
                    kf, vf = (_pb_fields(x) for x in n[2])
                    kt = _PB_TYPES.get(kf[5][-1])
                    vt = _PB_TYPES.get(vf.get(5, [0])[-1]) or _s(vf, 6)
                    lines.append("%s  map<%s, %s> %s = %d;\n" % (ind, kt, vt, _s(f, 1), f[3][-1]))
                    done.add(k)
                    break
        else:
            lines.append(_pb_message(n_raw(m, nname), ind + "  ", proto3))
    for e in m.get(4, []):
        lines.append(_pb_enum(e, ind + "  "))
    groups = {}
    for k, f in enumerate(fields):
        if k in done:
            continue
        if 9 in f and not f.get(17, [0])[-1]:
            groups.setdefault(f[9][-1], []).append(f)
            if len(groups[f[9][-1]]) == 1:
                lines.append(("oneof", f[9][-1]))
            continue
        lines.append("%s  %s\n" % (ind, _pb_field(f, proto3)))
    out = []
    for ln in lines:
        if isinstance(ln, tuple):
            out.append("%s  oneof %s {\n%s%s  }\n" % (ind, oneofs[ln[1]], "".join(
                "%s    %s\n" % (ind, _pb_field(f, proto3, False)) for f in groups[ln[1]]), ind))
        else:
            out.append(ln)
    return "%smessage %s {\n%s%s}\n" % (ind, name, "".join(out), ind)


def n_raw(m, name):
    return next(n for n in m.get(3, []) if _s(_pb_fields(n), 1) == name)


def proto_text(text):
    """.proto text of a base64 FileDescriptorProto; other text as it is"""
    if "syntax" in text or "message" in text:
        return text
    try:
        f = _pb_fields(base64.b64decode(text, validate=True))
    except Exception:
        return text
    syntax = _s(f, 12, "proto2")
    proto3 = syntax == "proto3"
    out = 'syntax = "%s";\n' % syntax
    if 2 in f:
        out += "package %s;\n" % _s(f, 2)
    for d in f.get(3, []):
        out += 'import "%s";\n' % d.decode()
    for m in f.get(4, []):
        out += _pb_message(m, "", proto3)
    for e in f.get(5, []):
        out += _pb_enum(e, "")
    return out


def canonical(schema_type, text):
    """The identity of a schema: for Avro and JSON its parsed form."""
    if schema_type in ("AVRO", "JSON"):
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    return text


def validate(schema_type, text):
    if schema_type not in KNOWN_TYPES:
        raise ValueError("unknown schema type %s" % schema_type)
    if schema_type in ("AVRO", "JSON"):
        parsed = json.loads(text)
        if schema_type == "AVRO" and not isinstance(parsed, (dict, list, str)):
            raise ValueError("an Avro schema is an object, an array or a name")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ks-test-registry/1"

    def log_message(self, fmt, *args):
        if ARGS.verbose:
            sys.stderr.write("registry: " + (fmt % args) + "\n")

    # ---- plumbing ----

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, code, message):
        self.reply(status, {"error_code": code, "message": message})

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw or b"{}")

    def authorized(self):
        if not ARGS.user:
            return True
        h = self.headers.get("Authorization") or ""
        if not h.startswith("Basic "):
            return False
        try:
            return base64.b64decode(h[6:]).decode() == ARGS.user
        except Exception:
            return False

    def dispatch(self, method):
        path = urlparse(self.path).path
        if path == "/_control":
            return self.control(method)
        with LOCK:
            CONTROL["requests"] += 1
            key = method + " " + re.sub(r"/\d+", "/N", path)
            CONTROL["by_path"][key] = CONTROL["by_path"].get(key, 0) + 1
            mode = CONTROL["mode"]
        if mode == "hang":
            time.sleep(60)
            mode = "error"
        if mode == "error":
            return self.error(503, 50301, "registry unavailable (test outage)")
        if not self.authorized():
            self.send_response(401)
            data = json.dumps({"error_code": 401, "message": "Unauthorized"}).encode()
            self.send_header("WWW-Authenticate", 'Basic realm="registry"')
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        try:
            with LOCK:
                return self.route(method, path)
        except (ValueError, KeyError, TypeError) as e:
            return self.error(422, 42201, "invalid schema: %s" % e)

    def control(self, method):
        if self.client_address[0] not in ("127.0.0.1", "::1"):
            return self.error(403, 403, "forbidden")
        if method == "POST":
            mode = self.body().get("mode")
            if mode not in ("ok", "error", "hang"):
                return self.error(422, 422, "mode is ok, error or hang")
            with LOCK:
                CONTROL["mode"] = mode
        with LOCK:
            return self.reply(200, dict(CONTROL))

    # ---- the API ----

    def schema_by_id(self, sid):
        for s in STATE["schemas"]:
            if s["id"] == sid:
                return s
        return None

    def version_body(self, subject, v):
        s = self.schema_by_id(v["id"])
        body = {"subject": subject, "version": v["version"], "id": v["id"], "schema": s["schema"]}
        if s["schemaType"] != "AVRO":
            body["schemaType"] = s["schemaType"]
        if s.get("references"):
            body["references"] = s["references"]
        return body

    def route(self, method, path):
        parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        subjects = STATE["subjects"]

        if method == "GET" and parts[:2] == ["schemas", "ids"] and len(parts) in (3, 4):
            try:
                sid = int(parts[2])
            except ValueError:
                return self.error(404, 40403, "Schema not found")
            s = self.schema_by_id(sid)
            if s is None:
                return self.error(404, 40403, "Schema %d not found" % sid)
            if len(parts) == 4 and parts[3] == "versions":
                return self.reply(200, [{"subject": subj, "version": v["version"]}
                                        for subj, vs in subjects.items() for v in vs if v["id"] == sid])
            if len(parts) == 4:
                return self.error(404, 404, "not found")
            body = {"schema": s["schema"]}
            if s["schemaType"] != "AVRO":
                body["schemaType"] = s["schemaType"]
            if s.get("references"):
                body["references"] = s["references"]
            return self.reply(200, body)

        if method == "GET" and parts == ["subjects"]:
            return self.reply(200, sorted(subjects))

        if parts[:1] == ["config"]:
            if len(parts) == 1:
                if method == "PUT":
                    STATE["config"]["compatibility"] = self.body().get("compatibility", "BACKWARD")
                    save()
                return self.reply(200, {"compatibilityLevel": STATE["config"]["compatibility"]}
                                  if method == "GET" else {"compatibility": STATE["config"]["compatibility"]})
            subj = parts[1]
            if method == "PUT":
                STATE["subject_config"][subj] = self.body().get("compatibility", "BACKWARD")
                save()
                return self.reply(200, {"compatibility": STATE["subject_config"][subj]})
            if subj not in STATE["subject_config"]:
                return self.error(404, 40408, "Subject '%s' does not have subject-level compatibility configured" % subj)
            return self.reply(200, {"compatibilityLevel": STATE["subject_config"][subj]})

        if parts[:1] == ["subjects"] and len(parts) >= 2:
            subj = parts[1]
            if len(parts) == 3 and parts[2] == "versions" and method == "POST":
                return self.register(subj, self.body())
            if len(parts) == 2 and method == "POST":
                return self.lookup(subj, self.body())
            if len(parts) == 2 and method == "DELETE":
                if subj not in subjects:
                    return self.error(404, 40401, "Subject '%s' not found." % subj)
                versions = [v["version"] for v in subjects.pop(subj)]
                save()
                return self.reply(200, versions)
            if subj not in subjects:
                return self.error(404, 40401, "Subject '%s' not found." % subj)
            if len(parts) == 3 and parts[2] == "versions" and method == "GET":
                return self.reply(200, [v["version"] for v in subjects[subj]])
            if len(parts) == 4 and parts[2] == "versions" and method == "GET":
                vs = subjects[subj]
                if parts[3] in ("latest", "-1"):
                    return self.reply(200, self.version_body(subj, vs[-1]))
                for v in vs:
                    if str(v["version"]) == parts[3]:
                        return self.reply(200, self.version_body(subj, v))
                return self.error(404, 40402, "Version %s not found." % parts[3])
        return self.error(404, 404, "HTTP 404 Not Found")

    def register(self, subj, body):
        schema_type = body.get("schemaType") or "AVRO"
        text = body["schema"]
        if schema_type == "PROTOBUF":
            text = proto_text(text)
        validate(schema_type, text)
        canon = canonical(schema_type, text)
        refs = body.get("references") or []
        s = next((s for s in STATE["schemas"]
                  if s["schemaType"] == schema_type and s["canonical"] == canon and s.get("references", []) == refs), None)
        if s is None:
            s = {"id": len(STATE["schemas"]) + 1, "schema": text, "schemaType": schema_type,
                 "canonical": canon, "references": refs}
            STATE["schemas"].append(s)
        vs = STATE["subjects"].setdefault(subj, [])
        if not any(v["id"] == s["id"] for v in vs):
            vs.append({"version": (vs[-1]["version"] + 1) if vs else 1, "id": s["id"]})
        save()
        return self.reply(200, {"id": s["id"]})

    def lookup(self, subj, body):
        if subj not in STATE["subjects"]:
            return self.error(404, 40401, "Subject '%s' not found." % subj)
        schema_type = body.get("schemaType") or "AVRO"
        text = proto_text(body["schema"]) if schema_type == "PROTOBUF" else body["schema"]
        canon = canonical(schema_type, text)
        for v in STATE["subjects"][subj]:
            s = self.schema_by_id(v["id"])
            if s["canonical"] == canon and s["schemaType"] == schema_type:
                return self.reply(200, self.version_body(subj, v))
        return self.error(404, 40403, "Schema not found")

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--state")
    ap.add_argument("--user", help="USER:PASSWORD for HTTP basic auth")
    ap.add_argument("--verbose", action="store_true")
    ARGS = ap.parse_args()
    load()
    srv = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    srv.daemon_threads = True
    if ARGS.port_file:
        tmp = ARGS.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % srv.server_address[1])
        os.replace(tmp, ARGS.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
