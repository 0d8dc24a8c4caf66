"""The real Codex CLI (0.171.0, ``make agents``) through the gateway, unchanged.

``codex exec`` runs headless with a throwaway ``HOME``/``CODEX_HOME`` whose config.toml
holds only what ``docs/agents-codex.md`` tells a user to write (a model provider: the
gateway's base URL and the environment variable of the key) plus its non-essential
traffic off. No ``-m``: Codex's default model name (``gpt-6.2-sol``) reaches the group
through its ``gpt-*`` alias, and with it Codex's code mode — tools in an
``additional_tools`` item, the shell through the custom freeform tool ``exec``.

The simulator scripts the model: it answers the first request of a turn with an
``exec`` call (a ``custom_tool_call`` on the Responses wire, an ``exec`` function call
with one string argument on the chat wire), and the request carrying the tool's output
with text. Codex really runs the command: its output reaching the upstream is the proof.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from routing.gateway.events import CallRecord
from routing.simulator.script import Behaviour, Fail, Reply, When
from tests.conftest import Harness

RESPONSES, CHAT = "{provider: resp, model: r1}", "{provider: chat, model: c1}"


def config(first: str, second: str) -> str:
    """One group, reached by Codex's default model name through its alias."""
    return f"""
providers:
  - {{name: resp, kind: openai-responses, base_url: "{{upstream}}", api_key: upstream-key-resp}}
  - {{name: chat, kind: openai, base_url: "{{upstream}}", api_key: upstream-key-chat}}
groups:
  - name: auto
    aliases: ["gpt-*"]
    retry: {{max_retries: 0}}
    targets: [{first}, {second}]
"""


MARK = "switchyard-ok"
JS = f'const r = await tools.exec_command({{cmd: "echo {MARK}"}});\ntext(r.output);'
RESULT_ON_RESPONSES = '"custom_tool_call_output"'
RESULT_ON_CHAT = '"role":"tool"'


def exec_on_responses(final: str) -> Behaviour:
    """A Responses model: ``exec`` first, ``final`` once the tool's output is back."""
    return When(RESULT_ON_RESPONSES, Reply(final), otherwise=Reply("", tool_call=_exec()))


def exec_on_chat(final: str) -> Behaviour:
    """A chat model given ``exec`` as a function with one string argument."""
    call = {"name": "exec", "arguments": {"input": JS}}
    return When(RESULT_ON_CHAT, Reply(final), otherwise=Reply("", tool_call=call))


def _exec() -> dict[str, Any]:
    return {"name": "exec", "input": JS}


@dataclass
class Codex:
    bin: Path
    home: Path
    work: Path
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(self.bin),
                "exec",
                "--skip-git-repo-check",
                "--sandbox",
                "danger-full-access",
                "-C",
                str(self.work),
                *args,
            ],
            env=self.env,
            cwd=self.work,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    def prompt(self, *args: str) -> str:
        """``codex exec [options] <prompt>``: its stdout (the final answer)."""
        done = self.run(*args)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def resume(self, text: str) -> str:
        done = self.run("resume", "--last", text)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout


@pytest.fixture
def h(harness: Harness) -> Harness:
    harness.configure(config(RESPONSES, CHAT))
    return harness


@pytest.fixture
def codex(h: Harness, codex_bin: Path, tmp_path: Path) -> Iterator[Codex]:
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text(
        textwrap.dedent(
            f"""\
            model_provider = "switchyard"
            check_for_update_on_startup = false

            [analytics]
            enabled = false

            [feedback]
            enabled = false

            [model_providers.switchyard]
            name = "Switchyard"
            base_url = "{h.gateway.url}/v1"
            env_key = "SWITCHYARD_KEY"
            """
        )
    )
    work = tmp_path / "work"
    work.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "SWITCHYARD_KEY": h.key,
        "NO_COLOR": "1",
    }
    yield Codex(codex_bin, home, work, env)


def bodies(h: Harness, model: str) -> list[dict[str, Any]]:
    return [dict(r.body) for r in h.upstream.requests if r.model == model]


def tool_output_seen(body: dict[str, Any]) -> bool:
    return MARK in json.dumps(body.get("input") or body.get("messages"))


def calls(h: Harness, n: int) -> list[CallRecord]:
    return h.events(CallRecord, at_least=n, timeout=10)


def test_codex_runs_its_shell_through_a_responses_target(h: Harness, codex: Codex) -> None:
    h.upstream.set_default(exec_on_responses("The command printed it."))
    out = codex.prompt("run the echo")
    assert "The command printed it." in out
    sent = bodies(h, "r1")
    assert len(sent) == 2 and sent[0]["model"] == "r1"
    assert sent[0]["input"][0]["type"] == "additional_tools"  # code mode: the default model
    assert sent[0]["stream"] is True
    result = [i for i in sent[1]["input"] if i.get("type") == "custom_tool_call_output"]
    assert result and MARK in json.dumps(result)
    records = calls(h, 2)
    assert [r.served_by for r in records] == ["resp/r1", "resp/r1"]
    assert all(r.outcome.value == "ok" and r.door == "responses" for r in records)


def test_codex_fails_over_from_responses_to_chat_in_its_tool_loop(h: Harness, codex: Codex) -> None:
    h.upstream.script("r1", Fail(500, "responses target down"), then=Fail(500, "still down"))
    h.upstream.script("c1", then=exec_on_chat("Chat finished the loop."))
    out = codex.prompt("run the echo")
    assert "Chat finished the loop." in out
    chat = bodies(h, "c1")
    assert any(t["function"]["name"] == "exec" for t in chat[0]["tools"])
    assert tool_output_seen(chat[-1])  # Codex ran the call the chat model made
    records = calls(h, 2)
    assert records[0].attempts[0].target == "resp/r1" and records[0].served_by == "chat/c1"
    assert records[0].served_by_fallback


def test_codex_fails_over_from_chat_to_responses(h: Harness, codex: Codex) -> None:
    h.configure(config(CHAT, RESPONSES))
    h.upstream.script("c1", Fail(500, "chat target down"), then=Fail(500, "still down"))
    h.upstream.script("r1", then=exec_on_responses("Responses finished the loop."))
    out = codex.prompt("run the echo")
    assert "Responses finished the loop." in out
    assert tool_output_seen(bodies(h, "r1")[-1])
    records = calls(h, 2)
    assert records[0].attempts[0].target == "chat/c1" and records[0].served_by == "resp/r1"


def test_a_switch_between_user_turns(h: Harness, codex: Codex) -> None:
    h.upstream.script("r1", Reply("First turn on responses."), then=Fail(500, "gone"))
    h.upstream.set_default(Reply("Second turn on chat."))
    assert "First turn on responses." in codex.prompt("hello")
    out = codex.resume("and again")
    assert "Second turn on chat." in out
    chat = bodies(h, "c1")[-1]
    texts = json.dumps(chat["messages"])
    assert "First turn on responses." in texts and "and again" in texts
    assert "[model changed:" in json.dumps(chat["messages"][-1])


def test_a_switch_inside_the_tool_loop(h: Harness, codex: Codex) -> None:
    """r1 asks for the shell, then fails when the tool's output comes back: chat answers
    the rest of the loop with Codex's custom call and its output in its history."""
    h.upstream.script(
        "r1",
        When(
            RESULT_ON_RESPONSES, Fail(500, "down mid-loop"), otherwise=Reply("", tool_call=_exec())
        ),
        then=Fail(500, "down"),
    )
    h.upstream.script("c1", then=Reply("Chat saw the output."))
    out = codex.prompt("run the echo")
    assert "Chat saw the output." in out
    chat = bodies(h, "c1")[-1]
    call_turn = [m for m in chat["messages"] if m.get("tool_calls")][-1]
    call = call_turn["tool_calls"][0]["function"]
    assert call["name"] == "exec" and json.loads(call["arguments"])["input"] == JS
    assert chat["messages"][-1]["role"] in ("tool", "user")
    assert MARK in json.dumps(chat["messages"])


def test_codex_compacts_locally_through_the_gateway(h: Harness, codex: Codex) -> None:
    """With a model provider of its own Codex never calls a remote compaction: past its
    limit it asks the model for a summary through ``/v1/responses`` like any turn —
    served here by a chat target after the Responses target failed."""
    h.upstream.script("r1", Reply("First answer."), then=Fail(500, "gone"))
    h.upstream.set_default(Reply("Summary or answer from chat."))
    limit = ("-c", "model_auto_compact_token_limit=1")
    assert "First answer." in codex.prompt(*limit, "hello")
    done = codex.run(*limit, "resume", "--last", "and again")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "context compacted" in done.stderr
    chat = json.dumps([b["messages"] for b in bodies(h, "c1")])
    assert "CONTEXT CHECKPOINT COMPACTION" in chat
    assert all(r.path == "/v1/chat/completions" for r in h.upstream.requests if r.model == "c1")
    assert not [r for r in h.upstream.requests if r.path.endswith("/compact")]
