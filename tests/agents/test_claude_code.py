"""Claude Code 2.1.197, unchanged, through the gateway (SPEC §15, issue 22).

The real CLI runs headless (``claude -p``, stream-json) with its default tools, betas and
model names — nothing but ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` pointed at the
live test gateway — against the simulator behind it. Its ``claude-*`` model names reach the
``claude`` group through the group's alias. Each test asserts on what the CLI printed, on
what the upstream received and on the call ledger.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from routing.gateway.events import CallOutcome, CallRecord
from routing.simulator.script import Fail, Reply, When
from tests.conftest import Harness

CONFIG = """
providers:
  - name: anthropic
    kind: anthropic
    base_url: {upstream}
    api_key: upstream-key-anthropic
  - name: chat
    kind: openai
    base_url: {upstream}
    api_key: upstream-key-chat
groups:
  - name: claude
    aliases: ["claude-*"]
    retry: {max_retries: 0}
    targets:
      - {provider: anthropic, model: a-model}
      - {provider: chat, model: c-model}
"""
BASH = {"name": "Bash", "arguments": {"command": "echo hi-from-bash", "description": "Print"}}


def tool_loop(final: str, needle: str = '"tool_result"') -> When:
    """A tool call (Bash) first; once the tool's result comes back, ``final``."""
    return When(needle, Reply(final), otherwise=Reply("Running it.", tool_call=BASH))


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(CONFIG)
    return harness


class Claude:
    """``claude -p`` in a throwaway HOME and project directory."""

    def __init__(self, binary: Path, h: Harness, tmp_path: Path) -> None:
        self.binary, self.h = binary, h
        self.home, self.work = tmp_path / "home", tmp_path / "work"
        self.home.mkdir()
        self.work.mkdir()

    def run(self, prompt: str, *, resume: bool = False) -> list[dict[str, Any]]:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "ANTHROPIC_BASE_URL": self.h.gateway.url,
            "ANTHROPIC_API_KEY": self.h.key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
        command = [str(self.binary), *(["--continue"] if resume else []), "-p", prompt]
        command += ["--output-format", "stream-json", "--verbose", "--allowedTools", "Bash"]
        done = subprocess.run(
            command, cwd=self.work, env=env, capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def result(events: list[dict[str, Any]]) -> str:
    [last] = [e for e in events if e["type"] == "result"]
    assert last["subtype"] == "success" and not last["is_error"], last
    return str(last["result"])


def tool_results(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for event in events:
        if event["type"] != "user":
            continue
        for block in event["message"]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                content = block["content"]
                out.append(content if isinstance(content, str) else json.dumps(content))
    return out


def messages_sent(h: Harness, model: str) -> list[Any]:
    return [r for r in h.upstream.requests if r.model == model]


@pytest.fixture
def claude(claude_bin: Path, h: Harness, tmp_path: Path) -> Claude:
    return Claude(claude_bin, h, tmp_path)


def test_a_bash_tool_call_and_its_result_stream_through(h: Harness, claude: Claude) -> None:
    h.upstream.script("a-model", then=tool_loop("The command printed hi-from-bash."))
    events = claude.run("run echo hi-from-bash")
    assert result(events) == "The command printed hi-from-bash."
    assert tool_results(events) == ["hi-from-bash"]  # the CLI really ran Bash
    first, second = messages_sent(h, "a-model")
    assert first.path == second.path == "/v1/messages"
    assert first.body["stream"] is True  # Claude Code streams; so did the gateway
    assert any(m["role"] == "system" for m in first.body["messages"])  # its Agent tool's
    assert "mid-conversation-system-2026-04-07" in first.headers["anthropic-beta"]
    last = second.body["messages"][-1]["content"]
    assert [b["type"] for b in last][:1] == ["tool_result"]
    assert "hi-from-bash" in json.dumps(last)
    records = h.events(CallRecord, at_least=2)
    assert [(r.group, r.outcome, r.door, r.served_by) for r in records] == [
        ("claude", CallOutcome.OK, "messages", "anthropic/a-model")
    ] * 2
    assert messages_sent(h, "c-model") == []


def test_signed_thinking_comes_back_byte_for_byte_in_the_tool_loop(
    h: Harness, claude: Claude
) -> None:
    """Claude Code keeps its thinking blocks only when an answer's ``model`` is the name it
    asked for; the gateway names that one, not the concrete ``a-model`` (SPEC §3, step 11),
    so the tool loop's next request carries the first answer's signed thinking block as
    the target wrote it — which a real Anthropic upstream with thinking on expects back."""
    h.upstream.script(
        "a-model",
        then=When(
            '"tool_result"',
            Reply("The command printed hi-from-bash."),
            otherwise=Reply("Running it.", reasoning="I should run it.", tool_call=BASH),
        ),
    )
    events = claude.run("run echo hi-from-bash")
    assert result(events) == "The command printed hi-from-bash."
    first, second = messages_sent(h, "a-model")
    assert "thinking" not in json.dumps(first.body["messages"])
    turn = next(m for m in reversed(second.body["messages"]) if m["role"] == "assistant")
    thinking = [b for b in turn["content"] if b["type"] == "thinking"]
    assert thinking == [
        {"type": "thinking", "thinking": "I should run it.", "signature": "sim-signature"}
    ]
    named = {e["message"]["model"] for e in events if e["type"] == "assistant"}
    [asked] = named
    assert asked.startswith("claude-") and asked != "a-model"  # the name Claude Code asked for
    [record, _] = h.events(CallRecord, at_least=2)
    assert record.served_by == "anthropic/a-model"  # the concrete model: on the record


def test_an_anthropic_529_fails_over_to_a_chat_target(h: Harness, claude: Claude) -> None:
    h.upstream.script("a-model", then=Fail(529, "Overloaded", type="overloaded_error"))
    h.upstream.script("c-model", then=tool_loop("Done via chat.", needle='"role":"tool"'))
    events = claude.run("run echo hi-from-bash")
    assert result(events) == "Done via chat."
    assert tool_results(events) == ["hi-from-bash"]
    first, second = messages_sent(h, "c-model")
    assert first.path == "/v1/chat/completions"
    roles = [m["role"] for m in first.body["messages"]]
    assert roles[0] == "system" and "system" in roles[1:]  # the mid-conversation one, in place
    assert first.body["tools"] and any(t["function"]["name"] == "Bash" for t in first.body["tools"])
    assert second.body["messages"][-1]["role"] in ("tool", "user")
    assert any(
        m["role"] == "tool" and "hi-from-bash" in str(m["content"]) for m in second.body["messages"]
    )
    records = h.events(CallRecord, at_least=2)
    assert all(r.served_by == "chat/c-model" and r.outcome is CallOutcome.OK for r in records)
    assert records[0].served_by_fallback


def test_a_switch_inside_the_tool_loop(h: Harness, claude: Claude) -> None:
    # The tool call comes from the anthropic target (with signed thinking); then it
    # overloads, and the chat target answers the tool result.
    h.upstream.script(
        "a-model",
        Reply("Running it.", reasoning="I should run it.", tool_call=BASH),
        then=Fail(529, "Overloaded", type="overloaded_error"),
    )
    h.upstream.script("c-model", then=Reply("Finished on chat."))
    events = claude.run("run echo hi-from-bash")
    assert result(events) == "Finished on chat."
    assert tool_results(events) == ["hi-from-bash"]
    [chat] = messages_sent(h, "c-model")
    sent = chat.body["messages"]
    call = next(m for m in sent if m["role"] == "assistant" and m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"] == "Bash"
    assert "reasoning_content" not in call  # another target's signed thinking stays behind
    assert "[model changed:" in json.dumps(sent)


def test_a_switch_between_user_turns_with_continue(h: Harness, claude: Claude) -> None:
    h.upstream.script("a-model", Reply("First answer.", reasoning="thinking one"))
    assert result(claude.run("say something")) == "First answer."
    h.upstream.script("a-model", then=Fail(529, "Overloaded", type="overloaded_error"))
    h.upstream.script("c-model", then=Reply("Second answer, from chat."))
    assert result(claude.run("and again", resume=True)) == "Second answer, from chat."
    [chat] = messages_sent(h, "c-model")
    text = json.dumps(chat.body["messages"])
    assert "First answer." in text and "and again" in text  # the history came along
    assert "sim-signature" not in text and "thinking one" not in text
    [turn_one, *_] = messages_sent(h, "a-model")
    resumed = [r for r in messages_sent(h, "a-model") if "and again" in json.dumps(r.body)]
    assert resumed, "the second turn tried the anthropic target first"
    # Same target, no rewrite: the anthropic attempt of turn two went out as Claude Code
    # sent it (its history's byte-identity is asserted with recorded bodies in
    # tests/api/test_claude_code_door.py); only the chat attempt was rewritten.
    first_turn, second_turn = h.events(CallRecord, at_least=2)
    assert [(a.target, a.rewrites) for a in first_turn.attempts] == [("anthropic/a-model", ())]
    anthropic_try, chat_try = second_turn.attempts
    assert anthropic_try.rewrites == () and not anthropic_try.ok
    assert "model-changed-notice" in chat_try.rewrites
    assert turn_one.body["messages"][0]["content"][-1]["text"] == "say something"


def test_a_chat_500_fails_over_to_the_anthropic_target(
    harness: Harness, claude_bin: Path, tmp_path: Path
) -> None:
    # The reverse direction: a chat-kind target first, the anthropic one as the fallback.
    harness.configure(
        CONFIG.replace(
            "      - {provider: anthropic, model: a-model}\n"
            "      - {provider: chat, model: c-model}\n",
            "      - {provider: chat, model: c-model}\n"
            "      - {provider: anthropic, model: a-model}\n",
        )
    )
    claude = Claude(claude_bin, harness, tmp_path)
    harness.upstream.script("c-model", then=Fail(500, "upstream broke"))
    harness.upstream.script("a-model", then=tool_loop("Done via anthropic."))
    events = claude.run("run echo hi-from-bash")
    assert result(events) == "Done via anthropic."
    assert tool_results(events) == ["hi-from-bash"]
    assert {r.path for r in messages_sent(harness, "c-model")} == {"/v1/chat/completions"}
    first, second = messages_sent(harness, "a-model")
    assert first.path == "/v1/messages"
    assert any(m["role"] == "system" for m in first.body["messages"])  # passed through
    assert "hi-from-bash" in json.dumps(second.body["messages"][-1]["content"])
    records = harness.events(CallRecord, at_least=2)
    assert all(r.served_by == "anthropic/a-model" for r in records)
    assert records[0].served_by_fallback


CLOUDS = """
providers:
  - {name: anthropic, kind: anthropic, base_url: "{upstream}", api_key: upstream-key}
  - name: bedrock
    kind: anthropic
    platform: bedrock
    base_url: "{host}"
    region: us-east-1
    aws_access_key_id: AKIATESTCLAUDECODE01
    aws_secret_access_key: test-secret-for-claude-code
  - name: vertex
    kind: anthropic
    platform: vertex
    base_url: "{host}"
    region: us-east5
    project: sim-project
    credentials_file: "{account}"
groups:
  - name: claude
    aliases: ["claude-*"]
    retry: {max_retries: 0}
    targets:
      - {provider: anthropic, model: claude-opus-4-8}
      - {provider: bedrock, model: "us.anthropic.claude-opus-4-8-v1:0"}
      - {provider: vertex, model: "claude-opus-4-8@20251101"}
"""


def test_the_same_claude_on_three_clouds_keeps_its_tool_loop_and_thinking(
    h: Harness, claude: Claude, tmp_path: Path
) -> None:
    """SPEC §19: Anthropic's API answers 529, the same Claude on Bedrock (SigV4) starts the
    tool loop with a signed thinking block, then fails; the same Claude on Vertex AI (a
    token from the service-account file) finishes it and gets that thinking block back
    byte for byte: one model family, so the signature is kept (docs/continuity.md)."""
    from tests.platforms.accounts import write_service_account

    account = write_service_account(h.upstream, tmp_path)
    host = h.upstream.base_url.removesuffix("/v1")
    h.configure(CLOUDS.replace("{host}", host).replace("{account}", str(account)))
    bedrock, vertex = "us.anthropic.claude-opus-4-8-v1:0", "claude-opus-4-8@20251101"
    h.upstream.script("claude-opus-4-8", then=Fail(529, "Overloaded", type="overloaded_error"))
    h.upstream.script(
        bedrock,
        then=When(
            '"tool_result"',
            Fail(503, "bedrock is down (simulated)"),
            otherwise=Reply("Running it.", reasoning="I should run it.", tool_call=BASH),
        ),
    )
    h.upstream.script(vertex, then=Reply("The command printed hi-from-bash."))
    events = claude.run("run echo hi-from-bash")
    assert result(events) == "The command printed hi-from-bash."
    assert tool_results(events) == ["hi-from-bash"]
    signed = messages_sent(h, bedrock)
    assert signed and all(r.headers["authorization"].startswith("AWS4-HMAC-SHA256") for r in signed)
    [finished] = messages_sent(h, vertex)
    assert finished.headers["authorization"].startswith("Bearer ")
    turn = next(m for m in reversed(finished.body["messages"]) if m["role"] == "assistant")
    assert [b for b in turn["content"] if b["type"] == "thinking"] == [
        {"type": "thinking", "thinking": "I should run it.", "signature": "sim-signature"}
    ]
    records = h.events(CallRecord, at_least=2)
    assert [r.served_by for r in records] == [f"bedrock/{bedrock}", f"vertex/{vertex}"]
