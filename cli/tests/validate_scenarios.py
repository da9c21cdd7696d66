"""Validates the bundled scenarios (JSON and TOML) against scenarios/scenario.schema.json,
which refers to conformance/schema.json for the config part, and checks that the schema rejects
a scenario with an unknown key. Usage: validate_scenarios.py REPO_ROOT"""
import json, sys, tomllib
from pathlib import Path
import jsonschema
from referencing import Registry, Resource
root = Path(sys.argv[1])
scn = json.loads((root/'scenarios/scenario.schema.json').read_text())
conf = json.loads((root/'conformance/schema.json').read_text())
reg = Registry().with_resources([(s['$id'], Resource.from_contents(s)) for s in (scn, conf)])
jsonschema.Draft202012Validator.check_schema(scn)
v = jsonschema.Draft202012Validator(scn, registry=reg)
bad = 0
for p in sorted((root/'scenarios').glob('*.*')):
    if p.name == 'scenario.schema.json' or p.suffix not in ('.json', '.toml'):
        continue
    doc = json.loads(p.read_text()) if p.suffix == '.json' else tomllib.loads(p.read_text())
    for e in v.iter_errors(doc):
        bad += 1
        print(f"{p.name}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
cv = jsonschema.Draft202012Validator({"$ref": conf["$id"] + "#/$defs/config"}, registry=reg)
for p in sorted((root/'scenarios/configs').glob('*.toml')):
    for e in cv.iter_errors(tomllib.loads(p.read_text())):
        bad += 1
        print(f"configs/{p.name}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
wrong = {"callers": {"arrivals": [{"kind": "list", "at_ms": [0], "rate": 1}]}, "upstream": {}}
if v.is_valid(wrong):
    bad += 1
    print("the schema accepted an unknown key")
print(f"scenarios valid: {bad == 0}")
sys.exit(1 if bad else 0)
