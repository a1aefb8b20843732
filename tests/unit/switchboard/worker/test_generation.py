"""The pure parts of the worker's generation layer: turning request prompts into token
ids, the context-length check, and the two concurrency helpers the endpoints rely on
(``run_all`` and ``merge_streams``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest

from router_core.worker_link import WorkerIdentity, WorkerLink, WorkerLinkSettings
from switchboard.text import Tokenizer
from switchboard.worker.concurrently import merge_streams, run_all
from switchboard.worker.generation import Generation, Prompt, PromptError
from switchboard.worker.settings import WorkerSettings


@pytest.fixture
def generation(default_tokenizer: Tokenizer, run_dir: Path) -> Generation:
    """A generation layer over a link that is never opened (no sockets), context 32."""
    link_settings = WorkerLinkSettings.in_run_dir(run_dir, "w0")
    identity = WorkerIdentity(
        "w0", link_settings.address, pid=1, host="box", version="", started_ns=0
    )
    settings = WorkerSettings(
        worker_id="w0", link=link_settings, context_length=32, default_max_new_tokens=8
    )
    return Generation(WorkerLink(link_settings, identity), default_tokenizer, settings)


class TestPrompts:
    def test_text_is_encoded_without_special_tokens(
        self, generation: Generation, default_tokenizer: Tokenizer
    ) -> None:
        """A text prompt keeps its text and is encoded with special-token parsing off, so
        special-token markup in it never becomes a control token."""
        text = "hello <|endoftext|> world"
        [prompt] = generation.prompts(text)
        assert prompt == Prompt(ids=default_tokenizer.encode(text, parse_special=False), text=text)
        assert not set(prompt.ids) & default_tokenizer.special_token_ids

    def test_token_ids_are_one_prompt_without_text(self, generation: Generation) -> None:
        """A flat list of ids is one prompt, taken as is, with no text."""
        assert generation.prompts([5, 6, 7]) == [Prompt(ids=[5, 6, 7])]

    def test_batches_keep_their_order(
        self, generation: Generation, default_tokenizer: Tokenizer
    ) -> None:
        """A list of texts or of id lists is a batch, one prompt each, in order."""
        texts = ["one", "two", "three"]
        assert [p.ids for p in generation.prompts(texts)] == [
            default_tokenizer.encode(t, parse_special=False) for t in texts
        ]
        assert [p.text for p in generation.prompts(texts)] == texts
        assert generation.prompts([[1, 2], [3]]) == [Prompt(ids=[1, 2]), Prompt(ids=[3])]

    def test_largest_vocabulary_id_is_accepted(
        self, generation: Generation, default_tokenizer: Tokenizer
    ) -> None:
        """The last id of the vocabulary is a valid prompt token."""
        last = default_tokenizer.vocab_size - 1
        assert generation.prompts([0, last]) == [Prompt(ids=[0, last])]

    @pytest.mark.parametrize(
        ("source", "message"),
        [
            ("", "empty"),
            ([], "empty"),
            ([[]], "empty"),
            (["fine", ""], "empty"),
            ([1, -1], "outside the vocabulary"),
            ([[1], [2, 10**9]], "outside the vocabulary"),
        ],
        ids=["empty_text", "empty_list", "empty_ids", "empty_in_batch", "negative", "too_big"],
    )
    def test_bad_prompts_are_refused(
        self, generation: Generation, source: object, message: str
    ) -> None:
        """Empty prompts, empty batches and ids outside the vocabulary raise PromptError."""
        with pytest.raises(PromptError, match=message):
            generation.prompts(source)  # type: ignore[arg-type]

    def test_first_id_past_the_vocabulary_is_refused(
        self, generation: Generation, default_tokenizer: Tokenizer
    ) -> None:
        """The id equal to the vocabulary size is outside it, and the error names it."""
        size = default_tokenizer.vocab_size
        with pytest.raises(PromptError, match=f"token id {size} is outside"):
            generation.prompts([1, size])


class TestCheckLength:
    def test_prompt_plus_output_up_to_the_context_passes(self, generation: Generation) -> None:
        """A prompt whose length plus max_new_tokens equals the context length passes."""
        generation.check_length(Prompt(ids=[1] * 30), 2)
        generation.check_length(Prompt(ids=[1] * 32), 0)

    def test_one_token_over_the_context_is_refused(self, generation: Generation) -> None:
        """One token more than the context length raises PromptError naming the sizes."""
        with pytest.raises(PromptError, match=r"\(30 tokens\) plus max_new_tokens \(3\)"):
            generation.check_length(Prompt(ids=[1] * 30), 3)


class TestRunAll:
    def test_results_come_in_call_order_not_finish_order(self) -> None:
        """Results are in the order of the calls even when later calls finish first."""

        async def scenario() -> list[str]:
            second_done = asyncio.Event()

            async def first() -> str:
                await second_done.wait()
                return "first"

            async def second() -> str:
                second_done.set()
                return "second"

            return await run_all([first(), second()])

        assert asyncio.run(scenario()) == ["first", "second"]

    def test_first_failure_is_raised_as_itself_and_cancels_the_rest(self) -> None:
        """A failing call's own exception is raised (no exception group) and the calls
        still waiting are cancelled."""
        cancelled = []

        async def scenario() -> None:
            async def waits_forever() -> None:
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    cancelled.append(True)
                    raise

            async def fails() -> None:
                await asyncio.sleep(0)
                raise PromptError("bad prompt")

            await run_all([waits_forever(), fails()])

        with pytest.raises(PromptError, match="bad prompt"):
            asyncio.run(scenario())
        assert cancelled == [True]

    def test_single_call_is_awaited_directly(self) -> None:
        """One call gives a one-item list, and its exception propagates unchanged."""

        async def value() -> int:
            return 7

        async def fails() -> int:
            raise ValueError("lone")

        assert asyncio.run(run_all([value()])) == [7]
        with pytest.raises(ValueError, match="lone"):
            asyncio.run(run_all([fails()]))


class Fed:
    """An async generator driven step by step from the test, recording its closing."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self.closed = False

    async def items(self) -> AsyncGenerator[str, None]:
        try:
            while True:
                item = await self.queue.get()
                if item is None:
                    return
                if isinstance(item, Exception):
                    raise item
                yield str(item)
        finally:
            self.closed = True


async def take(merged: AsyncGenerator[tuple[int, str], None], count: int) -> list[tuple[int, str]]:
    return [await anext(merged) for _ in range(count)]


class TestMergeStreams:
    def test_items_arrive_tagged_in_production_order(self) -> None:
        """Items of several generators come out as they are produced, each tagged with
        its generator's index; the merge ends when every generator has ended."""

        async def scenario() -> list[tuple[int, str]]:
            sources = [Fed(), Fed(), Fed()]
            merged = merge_streams([source.items() for source in sources])
            got = []
            for index, item in [(2, "c1"), (0, "a1"), (2, "c2"), (1, "b1"), (0, "a2")]:
                sources[index].queue.put_nowait(item)
                got += await take(merged, 1)
            for source in sources:
                source.queue.put_nowait(None)
            got += [pair async for pair in merged]
            assert all(source.closed for source in sources)
            return got

        assert asyncio.run(scenario()) == [
            (2, "c1"),
            (0, "a1"),
            (2, "c2"),
            (1, "b1"),
            (0, "a2"),
        ]

    def test_a_failing_generator_raises_and_closes_the_others(self) -> None:
        """An exception in one generator is raised by the merge, and the other
        generators are closed (so their requests would be aborted)."""
        sources = [Fed(), Fed()]

        async def scenario() -> list[tuple[int, str]]:
            merged = merge_streams([source.items() for source in sources])
            sources[0].queue.put_nowait("a1")
            got = await take(merged, 1)
            sources[1].queue.put_nowait(RuntimeError("engine went away"))
            got += [pair async for pair in merged]
            return got

        with pytest.raises(RuntimeError, match="engine went away"):
            asyncio.run(scenario())
        assert all(source.closed for source in sources)

    def test_leaving_early_closes_every_generator(self) -> None:
        """Closing the merge before its end closes every generator still open."""
        sources = [Fed(), Fed()]

        async def scenario() -> None:
            merged = merge_streams([source.items() for source in sources])
            sources[1].queue.put_nowait("b1")
            assert await take(merged, 1) == [(1, "b1")]
            await merged.aclose()

        asyncio.run(scenario())
        assert all(source.closed for source in sources)

    def test_single_generator_is_tagged_zero_and_closed_early(self) -> None:
        """With one generator every item is tagged 0; leaving early closes it."""
        source = Fed()

        async def scenario() -> list[tuple[int, str]]:
            merged = merge_streams([source.items()])
            source.queue.put_nowait("x")
            source.queue.put_nowait("y")
            got = await take(merged, 2)
            await merged.aclose()
            return got

        assert asyncio.run(scenario()) == [(0, "x"), (0, "y")]
        assert source.closed
