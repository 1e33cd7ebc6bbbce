"""What a generated workload exercises, feature by feature, so a test can check that the
generator produces what it claims to."""

from __future__ import annotations

from collections import Counter

from tests.generative.oracle.history import render
from tests.generative.oracle.model import Change, DdlScript, interpret
from tests.generative.oracle.tables import TABLES
from tests.generative.oracle.workload import Features, Workload


def coverage(workload: Workload, features: Features) -> Counter[str]:
    """Counts of what the rendered log of ``workload`` holds."""
    script = interpret(workload, features)
    found: Counter[str] = Counter()
    for item in script.items:
        if isinstance(item, DdlScript):
            found += _ddl_coverage(item)
            continue
        found["rollback"] += not item.commit
        for kind, changes in item.steps:
            found["partial_rollback"] += kind == "undo"
            if kind != "undo":  # an undo holds the changes of several statements
                found += _statement_coverage(changes)
    records = render(script, features).records
    found["csf"] = sum(record["CSF"] == 1 for record in records)
    found["region"] = sum("/" in str(record.get("SQL_REDO") or "") for record in records)
    found["unsupported"] = sum(
        "Unsupported Type" in str(record.get("SQL_REDO") or "") for record in records
    )
    found["interleaved"] = _interleavings(records)
    found[f"log_{workload.log}"] += 1  # read by the replay, or the real reader over the model
    for record in records:
        code, undone = record["OPERATION_CODE"], record.get("ROLLBACK") == 1
        found["lob_write"] += code == 10 and record.get("CSF") == 0
        found["lob_trim"] += code == 11
        found["lob_undo"] += code == 9 and undone
    return found


def _ddl_coverage(ddl: DdlScript) -> Counter[str]:
    found: Counter[str] = Counter()
    if ddl.text.startswith("truncate"):
        found["truncate"] += 1
        return found
    found["ddl"] += 1
    found["column_added"] += " add (" in ddl.text
    found["default_added"] += " DEFAULT " in ddl.text
    found["column_dropped"] += " drop column " in ddl.text
    found["column_renamed"] += " rename column " in ddl.text
    return found


def _statement_coverage(changes: list[Change]) -> Counter[str]:
    found: Counter[str] = Counter()
    for index, change in enumerate(changes):
        found["row_movement"] += change.op == "m"
        key = TABLES[change.table].key
        if change.op != "u" or not key or not change.before or not change.after:
            continue
        old, new = (tuple(image[c] for c in key) for image in (change.before, change.after))
        found["key_change"] += old != new
        later = [tuple(c.before[k] for k in key) for c in changes[index + 1 :] if c.before]
        found["intermediate_duplicate"] += new in later  # the key another row still holds
    return found


def _interleavings(records: list[dict[str, object]]) -> int:
    """How often a row of one transaction comes while another one is open."""
    open_: set[object] = set()
    count = 0
    for record in records:
        xid, code = record["XID"], record["OPERATION_CODE"]
        count += bool(open_ - {xid}) and code not in (7, 36)
        if code == 6:
            open_.add(xid)
        elif code in (7, 36):
            open_.discard(xid)
    return count
