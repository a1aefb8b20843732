"""The sampler wrapper that keeps batch spans of sampled requests (imports the SDK).

A hop that handles several sampled requests in one batch makes a root span linked to
each request's context (:func:`router_core.tracing.batch_span`). A ratio sampler would
drop most such roots although every linked request is sampled, so the batch would
vanish from those requests' traces. :class:`LinkedRootSampler` samples a root span that
has a sampled link and leaves every other decision to the configured sampler.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind, get_current_span
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

__all__ = ["LinkedRootSampler"]


class LinkedRootSampler(Sampler):
    """Sample roots with a sampled link; ask ``delegate`` about everything else."""

    def __init__(self, delegate: Sampler) -> None:
        self.delegate = delegate

    def should_sample(  # noqa: PLR0917 (the SDK's Sampler signature)
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        """RECORD_AND_SAMPLE for a root linked to a sampled context, else the delegate's."""
        if links and any(link.context.trace_flags.sampled for link in links):
            parent = get_current_span(parent_context).get_span_context()
            if not parent.is_valid:
                return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
        return self.delegate.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )

    def get_description(self) -> str:
        """Names the delegate, e.g. ``LinkedRootSampler{ParentBased{...}}``."""
        return f"LinkedRootSampler{{{self.delegate.get_description()}}}"
