"""Items 5 and 6: prompts (list, get with arguments) and completion/complete."""

from __future__ import annotations

import base64

import mcp_types as types
import pytest
from conftest import Interop

pytestmark = pytest.mark.anyio


async def list_all_prompts(h: Interop) -> list[types.Prompt]:
    out: list[types.Prompt] = []
    cursor: str | None = None
    for _ in range(50):
        page = await h.c.list_prompts(cursor=cursor)
        out.extend(page.prompts)
        cursor = page.next_cursor
        if cursor is None:
            return out
    raise AssertionError("prompts/list pagination never ended")


def args_of(prompt: types.Prompt) -> dict[str, bool]:
    return {a.name: bool(a.required) for a in prompt.arguments or []}


async def test_list_prompts(shared: Interop) -> None:
    prompts = {p.name: p for p in await list_all_prompts(shared)}
    assert set(prompts) == {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"}
    assert args_of(prompts["simple-prompt"]) == {}
    assert args_of(prompts["args-prompt"]) == {"city": True, "state": False}
    assert args_of(prompts["completable-prompt"]) == {"department": True, "name": True}
    assert args_of(prompts["resource-prompt"]) == {"resourceType": True, "resourceId": True}
    assert prompts["args-prompt"].title == "Arguments Prompt"
    assert prompts["completable-prompt"].description == "First argument choice narrows values for second argument."
    city = next(a for a in prompts["args-prompt"].arguments or [] if a.name == "city")
    assert city.description == "Name of the city"


def single_text(result: types.GetPromptResult) -> str:
    assert len(result.messages) == 1
    message = result.messages[0]
    assert message.role == "user"
    assert isinstance(message.content, types.TextContent)
    return message.content.text


async def test_get_simple_prompt(shared: Interop) -> None:
    result = await shared.c.get_prompt("simple-prompt")
    assert single_text(result) == "This is a simple prompt without arguments."


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"city": "Springfield", "state": "Illinois"}, "What's weather in Springfield, Illinois?"),
        ({"city": "Zürich"}, "What's weather in Zürich?"),
    ],
)
async def test_get_prompt_with_arguments(shared: Interop, arguments: dict[str, str], expected: str) -> None:
    result = await shared.c.get_prompt("args-prompt", arguments)
    assert single_text(result) == expected


async def test_get_completable_prompt(shared: Interop) -> None:
    result = await shared.c.get_prompt("completable-prompt", {"department": "Engineering", "name": "Bob"})
    assert single_text(result) == "Please promote Bob to the head of the Engineering team."


@pytest.mark.parametrize("resource_type", ["Text", "Blob"])
async def test_get_prompt_with_embedded_resource(shared: Interop, resource_type: str) -> None:
    result = await shared.c.get_prompt("resource-prompt", {"resourceType": resource_type, "resourceId": "9"})
    assert len(result.messages) == 2
    intro, embedded = result.messages
    assert isinstance(intro.content, types.TextContent)
    assert intro.content.text == (
        f"This prompt includes the {resource_type} resource with id: 9. Please analyze the following resource:"
    )
    assert isinstance(embedded.content, types.EmbeddedResource)
    resource = embedded.content.resource
    assert resource.uri == f"demo://resource/dynamic/{resource_type.lower()}/9"
    if resource_type == "Text":
        assert isinstance(resource, types.TextResourceContents)
        assert resource.text.startswith("Resource 9: This is a plaintext resource created at ")
    else:
        assert isinstance(resource, types.BlobResourceContents)
        assert base64.b64decode(resource.blob).decode().startswith("Resource 9: This is a base64 blob created at ")


# ----------------------------------------------------------------------------- completion

PROMPT = types.PromptReference(type="ref/prompt", name="completable-prompt")
RESOURCE_PROMPT = types.PromptReference(type="ref/prompt", name="resource-prompt")
TEXT_TEMPLATE = types.ResourceTemplateReference(type="ref/resource", uri="demo://resource/dynamic/text/{resourceId}")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", ["Engineering", "Sales", "Marketing", "Support"]), ("S", ["Sales", "Support"]), ("X", [])],
)
async def test_complete_prompt_argument(shared: Interop, value: str, expected: list[str]) -> None:
    result = await shared.c.complete(PROMPT, {"name": "department", "value": value})
    assert result.completion.values == expected
    assert result.completion.total == len(expected)
    assert result.completion.has_more is False


@pytest.mark.parametrize(
    ("department", "value", "expected"),
    [("Engineering", "", ["Alice", "Bob", "Charlie"]), ("Sales", "E", ["Eve"]), ("Support", "K", ["Kim"])],
)
async def test_complete_prompt_argument_with_context(
    shared: Interop, department: str, value: str, expected: list[str]
) -> None:
    wire = shared.wire.mark()
    result = await shared.c.complete(
        PROMPT, {"name": "name", "value": value}, context_arguments={"department": department}
    )
    assert result.completion.values == expected
    # The context argument travelled with the request.
    (request,) = shared.outbound("completion/complete", wire)
    assert request.params["ref"] == {"type": "ref/prompt", "name": "completable-prompt"}
    assert request.params["argument"] == {"name": "name", "value": value}
    assert request.params["context"] == {"arguments": {"department": department}}


async def test_complete_resource_prompt_argument(shared: Interop) -> None:
    result = await shared.c.complete(RESOURCE_PROMPT, {"name": "resourceType", "value": "B"})
    assert result.completion.values == ["Blob"]


@pytest.mark.parametrize(("value", "expected"), [("42", ["42"]), ("abc", []), ("0", [])])
async def test_complete_resource_template_argument(shared: Interop, value: str, expected: list[str]) -> None:
    result = await shared.c.complete(TEXT_TEMPLATE, {"name": "resourceId", "value": value})
    assert result.completion.values == expected
