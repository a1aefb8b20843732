"""The console's own modules (the SSE parser, the throughput bins), loaded in a real
browser from the admin app of a real stack (``test_admin_console.py``'s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.integration.harness.admin_stack import AdminStack
from tests.integration.harness.console_page import console_page
from tests.integration.test_admin_console import stack

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.integration

__all__ = ["stack"]


#: Comments, CRLF and CR line ends, multi-line data, a field without its space, and an
#: event with no data (not dispatched): what SseParser must make of it.
SSE_TEXT = (
    ": keep-alive\n\n"
    'event: snapshot\ndata: {"a": 1}\n\n'
    "event: worker\r\ndata: line one\r\ndata: line two\r\n\r\n"
    "data: plain\r\r"
    "id: 7\nretry: 100\nevent: empty\n\n"
    'event:load\ndata:{"x": 2}\n\n'
)
SSE_EVENTS = [
    ["snapshot", '{"a": 1}'],
    ["worker", "line one\nline two"],
    ["message", "plain"],
    ["load", '{"x": 2}'],
]


class TestConsoleModules:
    """The console's own modules, loaded in the browser from the admin app."""

    def test_sse_parser_reads_the_same_events_however_the_stream_is_cut(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """Fed in chunks of every size from 1 byte to the whole text, the parser yields
        exactly the same events (a CRLF split between chunks included)."""
        with console_page(browser, stack) as (page, _):
            outcomes = page.evaluate(
                """async (text) => {
                    const { SseParser } = await import("/static/sse.js");
                    const outcomes = [];
                    for (let size = 1; size <= text.length; size++) {
                        const seen = [];
                        const parser = new SseParser((type, data) => seen.push([type, data]));
                        for (let i = 0; i < text.length; i += size) {
                            parser.feed(text.slice(i, i + size));
                        }
                        outcomes.push(seen);
                    }
                    return outcomes;
                }""",
                SSE_TEXT,
            )
        assert len(outcomes) == len(SSE_TEXT)
        wrong = {size + 1: seen for size, seen in enumerate(outcomes) if seen != SSE_EVENTS}
        assert not wrong, wrong

    def test_throughput_bins_are_rates_per_second_with_idle_gaps_and_restarts(
        self, browser: Browser, stack: AdminStack
    ) -> None:
        """Counts rising 50 a second read as 50/s bins (none before the first sample); a
        count that stood still between sparse samples reads as zeros then the rise in the
        last second; a count that went down (a restarted worker) starts over."""
        with console_page(browser, stack) as (page, _):
            steady, gap, restarted = page.evaluate(
                """async () => {
                    const { ThroughputHistory } = await import("/static/throughput.js");
                    const history = new ThroughputHistory();
                    for (let t = 0; t <= 10; t++) history.observe(1000 + t, t * 50);
                    const steady = history.bins(1010);
                    history.observe(1020, 530);
                    const gap = history.bins(1020).slice(-10);
                    history.observe(1021, 5);
                    return [steady, gap, history.bins(1021)];
                }"""
            )
        assert steady == [None] * 50 + [50] * 10
        assert gap == [0] * 9 + [30]
        assert restarted == [None] * 60
