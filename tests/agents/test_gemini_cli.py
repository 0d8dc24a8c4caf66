"""The real Gemini CLI (0.61.0, ``make agents``) through the gateway's Gemini door, unchanged.

``gemini -p`` runs headless with its default settings and nothing but the three things the
README tells a user to set: ``GOOGLE_GEMINI_BASE_URL`` (the gateway), ``GEMINI_API_KEY`` (a
client key) and ``~/.gemini/settings.json`` in a throwaway ``HOME`` selecting API-key auth
with usage statistics off. Two flags make it run headless: ``--yolo`` approves its shell
tool without a prompt, ``--skip-trust`` trusts the fresh work directory. No ``-m``: its
default model ``auto`` first asks a small model (``gemini-3.5-flash-lite``) to score the
prompt — a ``generateContent`` with ``responseMimeType`` + ``responseJsonSchema`` — and
then streams the turn from the model the score picks (10 -> ``gemini-3.8-flash``; a
classifier answer it cannot parse falls back to ``gemini-3.1-pro-preview``). Every
``gemini-*`` name reaches the group through its alias.

The simulator scripts the model: the classifier request gets a score, a turn's first
request a ``run_shell_command`` call, and the request carrying the tool's output text. The
CLI really runs the command: its output reaching the upstream is the proof.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from routing.gateway.events import CallOutcome, CallRecord
from routing.simulator.gemini import SIGNATURE
from routing.simulator.script import Behaviour, DropAfter, Fail, Reply, When
from tests.conftest import Harness

ANTHROPIC = "{provider: anthropic, model: a-model}"
CHAT = "{provider: chat, model: c-model}"
GEMINI = "{provider: gem, model: g-model}"


def config(*targets: str) -> str:
    """One group, reached by every Gemini CLI model name through its alias."""
    return f"""
providers:
  - {{name: anthropic, kind: anthropic, base_url: "{{upstream}}", api_key: upstream-key-a}}
  - {{name: chat, kind: openai, base_url: "{{upstream}}", api_key: upstream-key-chat}}
  - {{name: gem, kind: gemini, base_url: "{{root}}", api_key: upstream-key-gemini}}
groups:
  - name: gemini
    aliases: ["gemini-*"]
    retry: {{max_retries: 0}}
    targets: [{", ".join(targets)}]
"""


MARK = "gemini-cli-ok"
SHELL = {"name": "run_shell_command", "arguments": {"command": f"echo {MARK}", "description": "p"}}
SCORED = json.dumps({"complexity_reasoning": "One explicit command.", "complexity_score": 10})
FLASH = "gemini-3.8-flash"  # what a score of 10 picks (unparsed: gemini-3.1-pro-preview)
# Where each kind's request carries the shell's output (When's default scope: the last item).
RESULT = {"a-model": '"tool_result"', "c-model": '"role":"tool"'}


def classified(otherwise: Behaviour) -> When:
    """The auto model's classifier request (its system prompt names ``complexity_score``)
    gets a score; every other request ``otherwise``."""
    return When("complexity_score", Reply(SCORED), otherwise=otherwise, scope="body")


def shell_loop(model: str, final: str) -> When:
    """A model that asks for the shell first and says ``final`` once its output is back."""
    if model == "g-model":  # Gemini's history is ``contents``: look at the whole body
        loop = When('"functionResponse"', Reply(final), Reply("", tool_call=SHELL), scope="body")
    else:
        loop = When(RESULT[model], Reply(final), otherwise=Reply("", tool_call=SHELL))
    return classified(loop)


README = Path(__file__).parents[2] / "README.md"


def readme_settings() -> str:
    """``~/.gemini/settings.json`` exactly as the README tells a user to write it."""
    block = r"<!-- gemini-cli-settings -->\s*```json\n(.*?)```"
    match = re.search(block, README.read_text(), re.S)
    assert match, "README.md has no Gemini CLI settings block"
    settings = json.loads(match.group(1))
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    return match.group(1)


class Gemini:
    """``gemini -p`` in a throwaway HOME and work directory, its events as stream-json."""

    def __init__(self, binary: Path, h: Harness, tmp_path: Path) -> None:
        self.binary, self.h = binary, h
        self.home, self.work = tmp_path / "home", tmp_path / "work"
        (self.home / ".gemini").mkdir(parents=True)
        (self.home / ".gemini" / "settings.json").write_text(readme_settings())
        self.work.mkdir()

    def run(self, prompt: str, *, resume: bool = False) -> list[dict[str, Any]]:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "GOOGLE_GEMINI_BASE_URL": self.h.gateway.url,
            "GEMINI_API_KEY": self.h.key,
        }
        command = [str(self.binary), "-p", prompt, "--yolo", "--skip-trust"]
        command += ["--output-format", "stream-json", *(["--resume", "latest"] if resume else [])]
        done = subprocess.run(
            command,
            cwd=self.work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,  # the machine is shared: generous, never tight
            check=False,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def answer(events: list[dict[str, Any]]) -> str:
    [last] = [e for e in events if e["type"] == "result"]
    assert last["status"] == "success", last
    return answer_text(events)


def answer_text(events: list[dict[str, Any]]) -> str:
    parts = [e["content"] for e in events if e["type"] == "message" and e["role"] == "assistant"]
    return "".join(parts)


def shell_outputs(events: list[dict[str, Any]]) -> list[str]:
    """What the CLI's own shell printed (the tool really ran)."""
    return [e["output"] for e in events if e["type"] == "tool_result" and e["status"] == "success"]


def models_used(events: list[dict[str, Any]]) -> set[str]:
    [last] = [e for e in events if e["type"] == "result"]
    return set(last["stats"]["models"])


def sent(h: Harness, model: str) -> list[Any]:
    return [r for r in h.upstream.requests if r.model == model]


def turns(h: Harness, model: str) -> list[Any]:
    """The requests of the agent's turns (not its classifier's)."""
    return [r for r in sent(h, model) if "complexity_score" not in json.dumps(r.body)]


def calls(h: Harness, n: int) -> list[CallRecord]:
    return h.events(CallRecord, at_least=n, timeout=10)


def configure(h: Harness, *targets: str) -> None:
    h.configure(config(*targets).replace("{root}", h.upstream.base_url.removesuffix("/v1")))


@pytest.fixture
def h(harness: Harness) -> Harness:
    configure(harness, ANTHROPIC, CHAT)
    return harness


@pytest.fixture
def gemini(gemini_bin: Path, h: Harness, tmp_path: Path) -> Gemini:
    return Gemini(gemini_bin, h, tmp_path)


def test_its_shell_tool_loop_through_an_anthropic_target(h: Harness, gemini: Gemini) -> None:
    h.upstream.script("a-model", then=shell_loop("a-model", "The shell printed it."))
    events = gemini.run(f"run echo {MARK}")
    assert answer(events) == "The shell printed it."
    assert shell_outputs(events) == [MARK]  # the CLI really ran its shell
    assert FLASH in models_used(events)  # it read the classifier's JSON answer
    first, second = turns(h, "a-model")
    assert first.path == second.path == "/v1/messages"
    assert first.body["stream"] is True
    assert any(t["name"] == "run_shell_command" for t in first.body["tools"])
    result = second.body["messages"][-1]["content"]
    assert [b["type"] for b in result] == ["tool_result"] and MARK in json.dumps(result)
    records = calls(h, 3)
    assert {(r.outcome, r.door, r.served_by) for r in records} == {
        (CallOutcome.OK, "gemini", "anthropic/a-model")
    }
    assert sent(h, "c-model") == []


def test_its_shell_tool_loop_through_a_chat_target(h: Harness, gemini: Gemini) -> None:
    configure(h, CHAT, ANTHROPIC)
    h.upstream.script("c-model", then=shell_loop("c-model", "Chat saw the output."))
    events = gemini.run(f"run echo {MARK}")
    assert answer(events) == "Chat saw the output."
    assert shell_outputs(events) == [MARK]
    first, second = turns(h, "c-model")
    assert first.path == "/v1/chat/completions" and first.body["stream"] is True
    assert any(t["function"]["name"] == "run_shell_command" for t in first.body["tools"])
    call = next(m for m in second.body["messages"] if m.get("tool_calls"))
    tool = second.body["messages"][-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == call["tool_calls"][0]["id"]
    assert MARK in json.dumps(tool["content"])
    assert {r.served_by for r in calls(h, 3)} == {"chat/c-model"}


def model_of(target: str) -> str:
    return target.split("model: ")[1].rstrip("}")


def fail_over(h: Harness, gemini: Gemini, first: str, second: str, fail: Fail) -> None:
    """``first`` fails every request with ``fail``; ``second`` serves the whole shell loop
    (the classifier's call, then the turn's two) in its own protocol."""
    configure(h, first, second)
    h.upstream.script(model_of(first), then=fail)
    h.upstream.script(model_of(second), then=shell_loop(model_of(second), "Finished it."))
    events = gemini.run(f"run echo {MARK}")
    assert answer(events) == "Finished it."
    assert shell_outputs(events) == [MARK]
    assert FLASH in models_used(events)
    records = calls(h, 3)
    assert all(r.served_by and r.served_by.endswith(model_of(second)) for r in records)
    assert [(a.target.split("/")[1], a.ok) for a in records[0].attempts] == [
        (model_of(first), False),
        (model_of(second), True),
    ]
    assert records[0].attempts[0].status == fail.status


def test_a_gemini_503_fails_over_to_the_anthropic_target(h: Harness, gemini: Gemini) -> None:
    fail_over(h, gemini, GEMINI, ANTHROPIC, Fail(503, "The model is overloaded."))
    result = turns(h, "a-model")[-1].body["messages"][-1]["content"]
    assert result[0]["type"] == "tool_result" and MARK in json.dumps(result)


def test_a_chat_500_fails_over_to_the_gemini_target(h: Harness, gemini: Gemini) -> None:
    """The tool loop on the Gemini target is the CLI's own request, passed through: the
    function call keeps the signature the target signed it with, byte for byte."""
    fail_over(h, gemini, CHAT, GEMINI, Fail(500, "chat target broke"))
    first, second = turns(h, "g-model")
    assert first.path.endswith("/models/g-model:streamGenerateContent")
    call, result = second.body["contents"][-2:]
    [part] = [p for p in call["parts"] if "functionCall" in p]
    assert part["thoughtSignature"] == SIGNATURE
    assert part["functionCall"]["name"] == "run_shell_command"
    response = result["parts"][0]["functionResponse"]
    assert response["id"] == part["functionCall"]["id"] and MARK in json.dumps(response)


def test_a_switch_between_turns(h: Harness, gemini: Gemini) -> None:
    """Turn one on the anthropic target; it overloads; ``--resume latest`` sends turn two
    with turn one in its history, and the chat target answers with that history."""
    overloaded = Fail(529, "Overloaded", type="overloaded_error")
    first_turn = classified(Reply("First turn on anthropic."))
    h.upstream.script("a-model", then=When("and again", overloaded, first_turn, scope="body"))
    h.upstream.script("c-model", then=classified(Reply("Second turn on chat.")))
    assert answer(gemini.run("hello")) == "First turn on anthropic."
    assert answer(gemini.run("and again", resume=True)) == "Second turn on chat."
    [chat] = turns(h, "c-model")
    history = json.dumps(chat.body["messages"])
    assert "First turn on anthropic." in history and "and again" in history
    assert "[model changed:" in history
    records = calls(h, 4)
    assert [r.served_by for r in records] == ["anthropic/a-model"] * 2 + ["chat/c-model"] * 2
    assert records[2].attempts[0].target == "anthropic/a-model"  # turn two tried it first


@pytest.mark.parametrize("target", [ANTHROPIC, CHAT, GEMINI], ids=["anthropic", "chat", "gemini"])
def test_the_auto_model_classifier_is_served_across_kinds(
    h: Harness, gemini: Gemini, target: str
) -> None:
    """The classifier's ``responseJsonSchema`` (upper-case OpenAPI types as the CLI writes
    them) reaches each kind as its own structured-output request; the CLI parses the
    answer and picks the model the score names."""
    configure(h, target, CHAT if target != CHAT else ANTHROPIC)
    model = model_of(target)
    h.upstream.script(model, then=classified(Reply("Done.")))
    events = gemini.run("say done")
    assert answer(events) == "Done."
    assert models_used(events) == {"gemini-3.5-flash-lite", FLASH}  # not the PRO fallback
    [request] = [r for r in sent(h, model) if "complexity_score" in json.dumps(r.body)]
    schema = json_schema(request.body)
    assert schema["required"] == ["complexity_reasoning", "complexity_score"]
    types = {name: p["type"] for name, p in schema["properties"].items()}
    if model == "g-model":  # same kind: passed as the CLI wrote it
        assert request.body["generationConfig"]["responseMimeType"] == "application/json"
        assert types == {"complexity_reasoning": "STRING", "complexity_score": "INTEGER"}
    else:
        assert schema["type"] == "object"
        assert types == {"complexity_reasoning": "string", "complexity_score": "integer"}
    assert all(r.served_by and r.served_by.endswith(model) for r in calls(h, 2))


def json_schema(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema a request asks its answer to follow, in each kind's own field."""
    if "generationConfig" in body:
        return dict(body["generationConfig"]["responseJsonSchema"])
    if "output_config" in body:
        return dict(body["output_config"]["format"]["schema"])
    return dict(body["response_format"]["json_schema"]["schema"])


def test_a_cut_after_the_commit_point_is_retried_by_the_cli(h: Harness, gemini: Gemini) -> None:
    """What Gemini CLI does with the door's last ``data: {"error": …}`` line (SPEC §20):
    its SDK reads the line as a chunk with no candidates, so the stream ends without a
    ``finishReason``; the CLI sends the turn again (4 times in all, each on the record as
    failed), prints each try's partial text, and reports the error in its result."""
    configure(h, CHAT)  # one target: nothing to rescue the cut stream on
    h.upstream.script("c-model", then=classified(DropAfter(2, content="Partial words")))
    events = gemini.run("say it")
    [last] = [e for e in events if e["type"] == "result"]
    assert last["status"] == "error"
    errors = [e["message"] for e in events if e["type"] == "error"]
    assert errors == ["Model stream ended without a finish reason."]
    assert answer_text(events) == "Partial words" * 4
    records = calls(h, 5)
    assert [r.outcome for r in records] == [CallOutcome.OK] + [CallOutcome.FAILED] * 4
    assert len(turns(h, "c-model")) == 4
