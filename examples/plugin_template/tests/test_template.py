"""The checks every plugin should carry (run with the plugin installed)."""

import numpy as np
import pytest

import privreg
from privreg import DiscreteLaplace, EventLog, InsecureReproducibleRandom, WorkflowContext
from privreg_template import hooks
from privreg_template.mechanism import NoisyHistogram


def test_items_register_through_the_registry():
    registry = privreg.load_registry(plugins={"template": hooks}, autoload=False)
    assert registry.get("template-histogram-mechanism").plugin == "template"
    assert registry.get("template-histogram", kind="workflow").params[0].name == "column"


def test_release_is_charged_before_it_is_returned():
    log = EventLog()
    out = NoisyHistogram(epsilon=2.0).release(
        np.array([5, 0, 7]), charger=log, rng=InsecureReproducibleRandom(seed=1)
    )
    assert log.events == (DiscreteLaplace(scale=0.5, sensitivity=1),)
    assert out.output.dtype == np.int64 and out.output.shape == (3,)


@pytest.mark.parametrize("bad", [np.array([1.5, 2.0]), np.array([-1, 2]), np.array([[1, 2]])])
def test_bad_counts_are_refused_and_nothing_is_charged(bad):
    log = EventLog()
    with pytest.raises(privreg.PrivregValueError):
        NoisyHistogram(epsilon=1.0).release(bad, charger=log)
    assert log.charges == ()


def test_workflow_runs_and_charges_once():
    ctx = WorkflowContext(rng=InsecureReproducibleRandom(seed=2))
    result = hooks.histogram_workflow(context=ctx, column="sex", epsilon=1.0)
    assert set(result.metrics) == {"Female", "Male"}
    assert len(ctx.charger.charges) == 1
