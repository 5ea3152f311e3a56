"""A ``session/prompt``'s content blocks as the text and images of a turn's prompt. Pure."""

from __future__ import annotations

from typing import Any

import msgspec

from sampler import ImagePart

from ._jsonrpc import INVALID_PARAMS, RpcError
from ._schema import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    resource_contents,
)

__all__ = ["prompt_parts"]


def prompt_parts(blocks: list[Any]) -> tuple[str, tuple[Any, ...]]:
    """A prompt's content blocks as the text and images of a :class:`UserPrompt`. Raises
    :class:`RpcError` -32602 for audio (not offered) and an empty prompt."""
    texts: list[str] = []
    images: list[ImagePart] = []
    for block in blocks:
        if isinstance(block, TextContent):
            texts.append(block.text)
        elif isinstance(block, ImageContent):
            images.append(ImagePart(media_type=block.mime_type, data=block.data))
        elif isinstance(block, ResourceLink):
            texts.append(f"[{block.name}]({block.uri})")
        elif isinstance(block, EmbeddedResource):
            try:
                contents = resource_contents(block)
            except msgspec.ValidationError as error:
                raise RpcError(INVALID_PARAMS, f"invalid embedded resource: {error}") from None
            if isinstance(contents, TextResourceContents):
                texts.append(f"<resource uri={contents.uri!r}>\n{contents.text}\n</resource>")
            else:
                texts.append(
                    f"[binary resource {contents.uri} ({contents.mime_type or 'unknown type'}) not shown]"
                )
        elif isinstance(block, AudioContent):
            raise RpcError(
                INVALID_PARAMS, "audio prompts are not supported (promptCapabilities.audio is false)"
            )
    if not texts and not images:
        raise RpcError(INVALID_PARAMS, "the prompt is empty")
    return "\n\n".join(texts), tuple(images)
