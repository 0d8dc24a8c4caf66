"""Google Gemini ``generateContent`` <-> the canonical (Chat Completions) view.

Requests (``request``): ``to_canonical`` (a Gemini body, for the Gemini door) and
``from_canonical`` (the body a ``gemini`` target gets, without ``model``: Google names
the model in the URL). Answers (``reply``): ``completion_to_canonical`` /
``completion_from_canonical`` and Google's error body. Streams (``stream``):
``StreamDecoder`` and ``StreamEncoder`` for ``data: <GenerateContentResponse>`` lines.
Schemas (``schema``): the OpenAPI subset of ``parameters`` / ``responseSchema`` as JSON
Schema.

Mapping decisions: ``contents`` turns (``user``/``model``) ↔ messages; ``systemInstruction``
↔ system messages (a mid-conversation system message joins ``systemInstruction``: Gemini
has no other place for one); ``inlineData``/``fileData`` images ↔ ``image_url`` parts;
``functionCall {id, name, args}`` ↔ ``tool_calls`` (a call's ``thoughtSignature`` ↔
``extra_content.google.thought_signature``, as Google's OpenAI-compatible API carries it;
a Gemini 3 target gets Google's documented placeholder on a turn's first call whose
signature history lost); ``functionResponse {id, name, response}`` ↔ ``tool`` messages
(``{"result": text}``); ``thought: true`` parts ↔ ``reasoning_content`` (history reasoning
*to* a Gemini target is dropped with a note: Gemini keeps its own thought signatures);
``functionDeclarations`` (``parameters`` normalised, ``parametersJsonSchema`` as is) ↔
function tools; ``functionCallingConfig`` ↔ ``tool_choice``; ``generationConfig`` ↔
sampling fields, ``stop``, ``max_tokens``, ``response_format`` (``responseJsonSchema`` /
``responseSchema`` ↔ json_schema, ``responseMimeType: application/json`` alone ↔
json_object) and ``thinkingConfig`` ↔ ``reasoning_effort`` (a level, or a budget read as
``effort_for_budget``; written as ``thinkingLevel`` for Gemini 3, ``thinkingBudget``
otherwise, with ``includeThoughts``). Hosted tools (``googleSearch``, ``codeExecution``,
``urlContext``…) follow the group's ``hosted_tools``; ``safetySettings`` and ``labels`` are
dropped with a note; ``cachedContent`` names state only Google has, so other kinds refuse it.
"""

from __future__ import annotations

from routing.protocols.gemini.reply import completion_from_canonical, completion_to_canonical
from routing.protocols.gemini.request import from_canonical, to_canonical
from routing.protocols.gemini.stream import StreamDecoder, StreamEncoder

__all__ = [
    "StreamDecoder",
    "StreamEncoder",
    "completion_from_canonical",
    "completion_to_canonical",
    "from_canonical",
    "to_canonical",
]
