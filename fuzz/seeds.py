#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into fuzz/corpus/<target>/
(`fuzz/run seed`), from the repository's examples, test corpora, fixtures,
built-in catalog and JSON Schemas, in the form each target reads (see the
target's doc comment). `fuzz/run cmin` then keeps the inputs that add
coverage. Needs `coordinatorctl` built (for a package to seed activations).
"""

import hashlib
import json
import pathlib
import struct
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
EXAMPLES = ["reviewed-notice", "permit-check", "appointment-reminder"]
MARKER = "#%file "


def write(target, data):
    if isinstance(data, str):
        data = data.encode()
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ("seed-" + hashlib.sha1(data).hexdigest())).write_bytes(data)


def project_text(directory):
    """A project directory as one text: workflow.yaml, then `#%file PATH` sections."""
    out = (directory / "workflow.yaml").read_text()
    extra = sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in (".rhai", ".yaml"))
    for path in extra:
        relative = path.relative_to(directory).as_posix()
        if relative in ("workflow.yaml", "scenarios.yaml", "runtime.yaml"):
            continue
        text = out if out.endswith("\n") else out + "\n"
        out = text + MARKER + relative + "\n" + path.read_text()
    return out


def yaml_files():
    patterns = ["examples/**/*.yaml", "crates/coordinator-core/catalog/*.yaml", "crates/coordinator-core/tests/**/*.yaml"]
    for pattern in patterns:
        yield from sorted(ROOT.glob(pattern))


def main():
    # yaml: every YAML file of the repository, and the JSON Schemas (JSON is YAML).
    for path in list(yaml_files()) + sorted(ROOT.glob("schemas/*.json")):
        write("yaml", path.read_bytes())

    # project: the examples and every case of the checker's test corpus.
    cases = sorted(p for p in (ROOT / "crates/coordinator-core/tests/corpus").iterdir() if p.is_dir())
    for directory in [ROOT / "examples" / e for e in EXAMPLES] + cases:
        write("project", project_text(directory))

    # runtime: a byte choosing the example project, then a runtime.yaml.
    runtimes = [ROOT / "examples/deployment/runtime.yaml", ROOT / "crates/coordinator-core/tests/fixtures/runtime.yaml"]
    runtimes += sorted(ROOT.glob("crates/coordinator-core/tests/corpus/*/runtime.yaml"))
    for path in runtimes:
        write("runtime", b"\x00" + path.read_bytes())

    # scenarios: a byte choosing the example workflow, then a scenarios.yaml.
    for i, example in enumerate(EXAMPLES):
        write("scenarios", bytes([i]) + (ROOT / "examples" / example / "scenarios.yaml").read_bytes())
    write("scenarios", b"\x00" + (ROOT / "crates/coordinator-core/tests/fixtures/scenarios.yaml").read_bytes())

    # signature: mode 0 `header\nbody`; mode 1 skew (i16), a change byte, the body.
    body = b'{"eventId":"0199c8a0-0000-7000-8000-000000000001","recordType":"application"}'
    write("signature", b"\x00t=1767607200,v1=" + b"a" * 64 + b",v0=zz\n" + body)
    write("signature", b"\x00t=1767607200, v1=7771f9014f1706bd377b52ea9a57e0a648df79535bfc2ea41d37764d4af26856\n" + body)
    for skew, change in [(0, 0), (300, 1), (-301, 2)]:
        write("signature", b"\x01" + struct.pack("<h", skew) + bytes([change]) + body)

    # seal: mode 0 bytes nobody sealed; mode 1 a binding byte, a position, a flip, the plaintext.
    write("seal", b"\x00\x00\x01\x02k1" + bytes(12) + bytes(16))
    write("seal", b"\x00\x09\x01\x02k9" + bytes(40))
    write("seal", b"\x01\x03\x05\x00\x01" + body)

    # oidc: mode 0 a raw token; mode 1 a key byte, then claims overriding valid ones.
    write("oidc", b"\x00\x00eyJhbGciOiJFZERTQSIsImtpZCI6ImVkLTEifQ.eyJpc3MiOiJodHRwczovL2lkLmV4YW1wbGUifQ.c2ln")
    for key, claims in [(0, {}), (1, {"aud": ["coordinator", "x"]}), (9, {"nbf": 0}), (2, {"sub": "trigger:x"}),
                        (0, {"iss": ["https://id.example"]}), (4, {"exp": 1.5})]:
        write("oidc", b"\x01" + bytes([key]) + json.dumps(claims).encode())

    # api_bodies: mode 0 admission, 1 completion, 2 event, 3 package, 4 chunked body, 5 content type.
    input_ = json.loads((ROOT / "examples/reviewed-notice/input.json").read_text())
    admission = {"workflow": "reviewed-notice", "revision": "sha256:" + "0" * 64, "idempotencyKey": "try-1", "input": input_}
    write("api_bodies", b"\x00" + json.dumps(admission).encode())
    write("api_bodies", b"\x01" + json.dumps({"reference": "case-4711"}).encode())
    event = {"eventId": "0199c8a0-0000-7000-8000-000000000001", "permitId": "0199c8a0-5c2e-7d41-9b3a-6f1e2d4c8a10",
             "validUntil": "2026-12-31", "occurredAt": "2026-01-05T10:00:00Z"}
    write("api_bodies", b"\x02" + json.dumps(event).encode())
    with tempfile.TemporaryDirectory() as tmp:
        package = pathlib.Path(tmp) / "p.pkg"
        ctl = ROOT / "target" / "debug" / "coordinatorctl"
        subprocess.run([str(ctl), "package", "--project", str(ROOT / "examples/permit-check"), "--output", str(package)],
                       check=True, stdout=subprocess.DEVNULL)
        write("api_bodies", b"\x03" + package.read_bytes())
    write("api_bodies", b"\x04\x10\x00" + b"abc\xffdef\xff\xffghij")
    write("api_bodies", b"\x05application/problem+json; charset=utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
