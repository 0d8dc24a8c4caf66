"""``POST /route/explain``: a dry run of the next call's routing (see ``routing.gateway.explain``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.http import HttpRequest
from ninja import Router
from ninja.errors import HttpError

from routing.api.config_api.http import body_doc, inline_schema, json_body, parse
from routing.api.config_api.schemas import AUTH, ErrorOut, ExplainIn, ExplainOut, InvalidOut
from routing.gateway.explain import route_explain
from routing.gateway.runtime import get_runtime

router = Router(tags=["routing"])


@router.post(
    "/route/explain",
    response={200: ExplainOut, **AUTH, 404: ErrorOut, 422: InvalidOut},
    summary="Dry run: the order the next call would try, and why (no side effects)",
    openapi_extra=body_doc(inline_schema(ExplainIn)),
)
async def route_explain_view(request: HttpRequest) -> dict[str, Any]:
    body = parse(ExplainIn, json_body(request))
    result = await route_explain(get_runtime(), model=body.model, session=body.session)
    if result is None:
        raise HttpError(404, f"nothing answers to the model name {body.model!r}")
    return asdict(result)
