"""Names galley writes in more than one place agree with their one source:
the sampling policies (galley/sampling_policies.h, exported as
galley.sampling_policies), the job spec's fields (client/wire/messages.cc,
exported as _galley.job_spec_fields), the listing request's fields, the
bounds of max_resolution and the largest request (galley/job_spec.h,
exported as _galley.listing_fields, max_resolution_range and
max_request_bytes) and the versions (CMakeLists.txt). Documentation cannot
be generated from them, so it is checked here."""

import pathlib
import re
import subprocess

import pytest

import galley
from conftest import GALLEYD

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]


def test_policy_names_agree_everywhere():
    names = list(galley.sampling_policies)
    assert names[0] == "dsa" and "sequential" not in names
    assert galley._galley.sampling_policies["sequential"] is False
    # The daemon's config accepts exactly these, and says so.
    out = subprocess.run([GALLEYD, "--check-config", "--owner-only", "--default-policy", "bogus"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert f"got 'bogus'; expected one of {', '.join(names)}" in out.stderr
    # The documented key, the example config and the loader's docstring.
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert ", ".join(f"`{name}`" for name in names) in operations
    config = " ".join(line.lstrip("# ") for line in
                      (ROOT / "scripts" / "galleyd.toml").read_text().splitlines())
    assert f"name none: {', '.join(names)}." in config
    doc = galley.DataLoader.__doc__ or galley.DataLoader.__init__.__doc__
    for name in names:
        assert f"``{name}``" in doc, name


def test_unknown_policy_is_refused_before_any_daemon_is_asked(tiny_folder):
    # No socket: the check must come first, from the exported list.
    with pytest.raises(ValueError, match=r"unknown policy='DSA'.*dsa, dsa-chain, independent"):
        galley.DataLoader(str(tiny_folder), policy="DSA")
    with pytest.raises(ValueError, match="needs shuffle=True"):
        galley.DataLoader(str(tiny_folder), policy="lockstep", shuffle=False)


def test_job_spec_fields_agree_with_the_protocol_document():
    text = (ROOT / "docs" / "protocol.md").read_text()
    table = text.split("### 1.4 OpenJob body", 1)[1].split("\n\n", 2)[1]
    documented = []
    for row in table.splitlines()[2:]:
        documented += re.findall(r"`([a-z0-9_]+)`", row.split("|")[1])
    assert documented == list(galley._galley.job_spec_fields)


def test_the_listing_requests_fields_agree_with_the_protocol_document():
    text = (ROOT / "docs" / "protocol.md").read_text()
    section = text.split("### 1.6 The listing request", 1)[1]
    request = re.search(r"`\{(what: \"listing\", [^}]*)\}`", section).group(1)
    names = [name.strip() for name in request.replace('what: "listing"', "what").split(",")]
    assert names == ["what", *galley._galley.listing_fields, "begin", "count"]
    # Each one is a field of the OpenJob body.
    assert set(galley._galley.listing_fields) <= set(galley._galley.job_spec_fields)


def test_the_bounds_the_loader_checks_agree_with_the_documents():
    low, high = galley._galley.max_resolution_range
    protocol = (ROOT / "docs" / "protocol.md").read_text()
    assert f"| `max_resolution` | uint: 0, or {low} to {high} |" in protocol
    assert f"`N` is an `int` from {low} to {high}" in (ROOT / "docs" / "datasets.md").read_text()
    request = galley._galley.max_request_bytes
    assert f"{request >> 20} MiB ({request:,})" in protocol


def test_shard_member_kinds_agree_with_the_datasets_document_and_the_decoders():
    kinds = galley._galley.shard_member_kinds
    text = (ROOT / "docs" / "datasets.md").read_text()
    for kind in ("json", "integer", "text"):
        row = "| " + ", ".join(f"`.{extension}`" for extension in kinds[kind]) + " |"
        assert row in text, kind
    from galley import fields
    assert fields.IMAGE_EXTENSIONS == kinds["image"] == ("jpg", "jpeg", "png", "webp")
    decoded = {"json": fields.json.loads, "integer": fields._decode_int,
               "text": fields._decode_text}
    for kind, decoder in decoded.items():
        for extension in kinds[kind]:
            assert fields._member_decoder(extension, unpickle=False) is decoder, extension


def test_a_spec_key_galley_does_not_know_is_refused_by_name(daemon, tiny_folder):
    client = galley._galley.Client(daemon.socket)
    spec = {"dataset": str(tiny_folder), "batch_size": 2, "transform": {"ops": []},
            "prefetch_factor": 2}
    with pytest.raises(galley.InvalidRequest, match="'prefetch_factor'"):
        client.open_job(spec)


def test_documented_versions_are_this_release():
    release = galley.__version__
    protocol = galley.protocol_version
    for doc in DOCS:
        text = doc.read_text()
        for version, number in re.findall(r"galley(?:d|ctl)? (\d+\.\d+\.\d+) \(protocol (\d+)\)",
                                          text):
            assert (version, int(number)) == (release, protocol), doc.name
        for number in re.findall(r"this side speaks protocol (\d+)", text):
            assert int(number) == protocol, doc.name
