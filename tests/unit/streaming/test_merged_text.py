"""The text deltas one network read completes reach the turn as one, still counted per delta."""

from agentvm.llm import ModelStart, ModelStop, TextDelta, ToolCallStart, merged_text


def test_consecutive_text_deltas_become_one_with_their_count():
    events = [TextDelta("Hel"), TextDelta("lo"), TextDelta(" there", deltas=2)]
    assert merged_text(events) == [TextDelta("Hello there", deltas=4)]


def test_other_events_keep_their_place_between_merged_runs():
    start, call, stop = ModelStart("m1", "model"), ToolCallStart("c1", "weather"), ModelStop("tool_use")
    events = [start, TextDelta("a"), TextDelta("b"), call, TextDelta("c"), stop]
    assert merged_text(events) == [start, TextDelta("ab", deltas=2), call, TextDelta("c"), stop]


def test_a_single_event_or_none_is_returned_as_it_is():
    one = [TextDelta("x")]
    assert merged_text(one) is one
    assert merged_text([]) == []
