"""The privacy report of a fit: the phases rebuilt with the executed steps, the assumptions of the
schema, of the record count and of the method, and the report's method-level fields.
"""

from __future__ import annotations

import math
import warnings

from dpgen_jax import privacy


def fit_report(model, plan, result, schema, phases: list, planned_phases: list, *, n: int, public_n: bool,
               n_is_public: bool, preset: str | None, max_seconds: float | None, resumed: bool,
               seeded: bool) -> dict:
    """The report of ``model``'s fit that executed ``result`` (a ``TrainResult``) for ``plan``:
    ``phases`` as run (executed steps), ``planned_phases`` the same with the planned steps.

    ``n``: the record count the rates used (the user's public N, or the row count); ``public_n``:
    the user gave it; ``n_is_public``: it may reach an output (privacy rule 10). Warns when a time
    budget cut the schedule.
    """
    cut = {p.name: (p.steps, q.steps)
           for p, q in zip(privacy.flat_phases(phases), privacy.flat_phases(planned_phases))
           if p.steps != q.steps}
    if cut:  # the executed and planned steps of the fitted configuration (public if n is)
        warnings.warn(f"max_seconds={max_seconds} cut the schedule: (executed, planned) steps "
                      f"{cut}; the report accounts for the executed steps.", stacklevel=3)
    assumptions = list(schema.assumptions())
    if not model.USES_NUM_RECORDS:
        given = f" (the num_records N={n} given by the user is not used)" if public_n else ""
        assumptions.append(
            "No record count enters this method's mechanisms: noisy counts are normalised by "
            f"their own noisy total, and the number of private rows is not published{given}.")
        if not public_n:
            assumptions.append(
                f"As the number of private rows n is not published, this report does not check "
                f"delta={plan.delta:g} against it: a delta of 1/n or more is met by a mechanism "
                "that publishes one random record outright, so delta must be well below 1/n.")
    elif public_n:
        assumptions.append(
            f"The sampling rates use the public number of records N={n} given by the user "
            "(num_records); the private row count is not published.")
    else:
        assumptions.append(
            f"The number of private rows (n={n}) is treated as public: it sets the sampling "
            "rates q = expected batch size / n (and a schedule given in epochs). Pass num_records=N (a public count) to avoid "
            "this assumption.")
    assumptions.extend(result.assumptions)
    if resumed:
        assumptions.append(
            "Training was resumed from a private checkpoint: the steps reported are every "
            "distinct step executed across the runs; mechanisms before the saved point were "
            "replayed with the same keys on the same inputs (the same outputs) or restored.")
    if cut and plan.private:
        planned_epsilon = privacy.epsilon(planned_phases, plan.delta, accountant=model.ACCOUNTANT)
        assumptions.append(
            f"A time budget (max_seconds={max_seconds}) stopped training early, after the "
            "executed steps listed. The stop was decided from the wall clock alone, which this "
            "accounting treats as independent of the private rows; without that assumption the "
            f"planned schedule's epsilon ({planned_epsilon:.6g}) still bounds the run.")
    # dataset_size only when n is public: privacy.report writes it into a sentence and a
    # warning when delta >= 1/n (and the sentence's absence would say n < 1/delta).
    report = privacy.report(phases, plan.delta, accountant=model.ACCOUNTANT,
                            dataset_size=n if n_is_public else None, assumptions=assumptions,
                            seeded=seeded)
    report["method"] = model.METHOD
    report["preset"] = preset
    report["target_epsilon"] = (None if plan.target_epsilon is None or math.isinf(plan.target_epsilon)
                                else plan.target_epsilon)
    report["num_records_public"] = public_n
    report["released"] = sorted(result.released) + ["schema", "config"]
    report["paper_accounting"] = model._paper_accounting(plan.config, phases, plan.delta, report) if plan.private else None
    return report
