"""Run by tests/test_price_once.py in a second process: open the ledger, print its state
and its decisions on the test's candidate releases, as JSON."""

import json
import math
import sys

from privreg.budget.session import BudgetSession

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from test_price_once import candidates

path, seed = sys.argv[1], int(sys.argv[2])
s = BudgetSession.open(path)
decisions = []
for event, stated in candidates(seed):
    q = s.price(event, stated=stated)
    decisions.append([q.granted, q.filter, None if not math.isfinite(q.epsilon) else q.epsilon])
print(json.dumps({"state": {f.name: f.state() for f in s.filters}, "decisions": decisions}))
