"""Optional OpenTelemetry traces of turns: GenAI spans for the agent, each model call, each tool.

Off unless an exporter is configured: ``AVM_OTEL_EXPORTER=console|otlp``, or the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` (then ``otlp``; the exporter reads the other ``OTEL_EXPORTER_OTLP_*``
variables itself). Off, nothing of OpenTelemetry is imported (the Lambda import path stays as it
is) and each hook below is a call on a no-op object. On, the host's composition root calls
``configure_tracing`` once: the SDK's ``TracerProvider`` with a batching processor (the console
exporter: a simple one), service name ``agentvm``. Install ``agentvm-runtime[otel]``; on Lambda add the
packages to the layer (or use the ADOT Python layer).

Spans, after the OpenTelemetry GenAI semantic conventions (``gen_ai.*``, development status):

- ``invoke_agent <image name>`` (INTERNAL), one per turn attempt: ``gen_ai.operation.name`` =
  ``invoke_agent``, ``gen_ai.agent.id``, ``gen_ai.agent.name``, ``gen_ai.conversation.id`` (the
  session), ``gen_ai.provider.name``, ``gen_ai.request.model``, the usage summed over its steps,
  ``error.type`` when it failed; plus ``agentvm.tenant.id``, ``agentvm.container.id``,
  ``agentvm.turn.id`` and ``agentvm.turn.status``;
- ``chat <model>`` (CLIENT), one per model call, a child of the turn: ``gen_ai.request.model``,
  ``gen_ai.request.max_tokens``, ``gen_ai.response.model``, ``gen_ai.response.id``,
  ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens``/``output_tokens``, ``error.type``;
- ``execute_tool <tool>`` (INTERNAL), one per tool result, a child of the turn:
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` (``function``), ``error.type``
  (the failure: ``error``, ``timeout``, ``invalid_input``, ``unknown_tool``, ``denied``).

No message content is recorded (prompts and replies stay out of the traces).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentvm.agent.loop import StepOutcome, TurnOutcome
    from agentvm.agent.tools.toolbox import ToolRun
    from agentvm.config import Settings
    from agentvm.records import TurnJob

log = logging.getLogger("agentvm.tracing")

_tracer: Any = None  # an OpenTelemetry Tracer once configured; None: tracing is off


def exporter_of(settings: Settings) -> str | None:
    """The exporter these settings ask for: "console", "otlp", or None (off)."""
    if settings.otel_exporter is not None:
        return None if settings.otel_exporter == "none" else settings.otel_exporter
    return "otlp" if settings.otel_exporter_otlp_endpoint else None


def configure_tracing(settings: Settings) -> bool:
    """Turn tracing on if the settings name an exporter (once per process); True if it is on."""
    global _tracer
    exporter = exporter_of(settings)
    if exporter is None or _tracer is not None:
        return _tracer is not None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "agentvm"}))
    if exporter == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    use_tracer_provider(provider)
    log.info("OpenTelemetry traces on", extra={"exporter": exporter})
    return True


def use_tracer_provider(provider: Any) -> None:
    """Trace with this provider (``configure_tracing``'s, or a test's with an in-memory exporter);
    None turns tracing off again."""
    global _tracer
    _tracer = None if provider is None else provider.get_tracer("agentvm")


def tracing_on() -> bool:
    return _tracer is not None


class TurnTrace:
    """The spans of one turn attempt. ``start_turn`` returns ``NO_TRACE`` when tracing is off."""

    def __init__(
        self, tracer: Any, job: TurnJob, *, agent_name: str, model_ref: str, max_tokens: int
    ) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = tracer
        self._model_ref = model_ref
        self._max_tokens = max_tokens
        provider, _, _model = model_ref.partition("/")
        self._provider = provider
        self.span = tracer.start_span(
            f"invoke_agent {agent_name}".strip(),
            kind=trace.SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.id": job.agentId,
                "gen_ai.agent.name": agent_name,
                "gen_ai.conversation.id": job.sessionId,
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": model_ref,
                "agentvm.tenant.id": job.tenantId,
                "agentvm.container.id": job.containerId,
                "agentvm.turn.id": job.turnId,
            },
        )
        self._context = trace.set_span_in_context(self.span)
        self._call: Any = None

    def model_call_started(self) -> None:
        self._call = self._tracer.start_span(
            f"chat {self._model_ref}",
            context=self._context,
            kind=self._trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": self._provider,
                "gen_ai.request.model": self._model_ref,
                "gen_ai.request.max_tokens": self._max_tokens,
            },
        )

    def model_call_finished(self, step: StepOutcome) -> None:
        span, self._call = self._call, None
        if span is None:
            return
        span.set_attribute("gen_ai.usage.input_tokens", step.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", step.output_tokens)
        if step.model:
            span.set_attribute("gen_ai.response.model", step.model)
        if step.message_id:
            span.set_attribute("gen_ai.response.id", step.message_id)
        if step.stop_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [step.stop_reason])
        if step.error is not None:
            self._failed(span, step.error.code, step.error.message)
        span.end()

    def tool_finished(self, run: ToolRun) -> None:
        """A tool's result is stored: its span, backdated to when the call started."""
        now = time.time_ns()
        span = self._tracer.start_span(
            f"execute_tool {run.result.name}",
            context=self._context,
            kind=self._trace.SpanKind.INTERNAL,
            start_time=now - int(run.duration_s * 1e9),
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": run.result.name,
                "gen_ai.tool.call.id": run.result.call_id,
                "gen_ai.tool.type": "function",
            },
        )
        if run.result.is_error:
            self._failed(span, run.status, None)
        span.end(end_time=now)

    def end(self, outcome: TurnOutcome | None, status: str) -> None:
        if self._call is not None:  # a model call cut off by an exception
            self._call.end()
            self._call = None
        span = self.span
        span.set_attribute("agentvm.turn.status", status)
        if outcome is not None:
            span.set_attribute("gen_ai.usage.input_tokens", outcome.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", outcome.output_tokens)
            if outcome.error is not None and status == "failed":
                self._failed(span, outcome.error.code, outcome.error.message)
        span.end()

    def _failed(self, span: Any, error_type: str, description: str | None) -> None:
        span.set_attribute("error.type", error_type)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, description))


class _NoTrace:
    """Tracing is off: every hook does nothing."""

    def model_call_started(self) -> None:
        pass

    def model_call_finished(self, step: StepOutcome) -> None:
        pass

    def tool_finished(self, run: ToolRun) -> None:
        pass

    def end(self, outcome: TurnOutcome | None, status: str) -> None:
        pass


NO_TRACE = _NoTrace()


def start_turn(job: TurnJob, *, agent_name: str, model_ref: str, max_tokens: int) -> TurnTrace | _NoTrace:
    """The spans of this turn attempt (``NO_TRACE`` when tracing is off: nothing is imported)."""
    if _tracer is None:
        return NO_TRACE
    try:
        return TurnTrace(_tracer, job, agent_name=agent_name, model_ref=model_ref, max_tokens=max_tokens)
    except Exception as exc:  # a tracing failure must never fail a turn
        log.warning("a turn's trace could not start", extra={"error": type(exc).__name__})
        return NO_TRACE


__all__ = [
    "NO_TRACE",
    "TurnTrace",
    "configure_tracing",
    "exporter_of",
    "start_turn",
    "tracing_on",
    "use_tracer_provider",
]
