"""Validates JSON documents under pydantic models of the existing module format.

These are the models existing orchestrators of this kind use (base fields only),
in strict mode so every JSON type must match exactly. Reads one JSON object from
stdin: {"manifests": [...], "calls": [...], "results": [...]}; exits 0 when all
validate, 1 with the errors otherwise.
"""

import json
import sys
from typing import Any, Dict, List, Optional

from pydantic import BaseModel, ConfigDict, ValidationError


class Strict(BaseModel):
    model_config = ConfigDict(strict=True)


class ToolParameter(Strict):
    name: str
    type: str
    description: str
    required: bool = True
    enum: Optional[List[str]] = None


class ToolDefinition(Strict):
    name: str
    description: str
    parameters: List[ToolParameter] = []
    required_permission: str = "guest"


class ModuleManifest(Strict):
    module_name: str
    description: str
    tools: List[ToolDefinition]


class ToolCall(Strict):
    tool_name: str
    arguments: Dict[str, Any] = {}
    user_id: Optional[str] = None


class ToolResult(Strict):
    tool_name: str
    success: bool
    result: Any = None
    error: Optional[str] = None


def main() -> int:
    documents = json.load(sys.stdin)
    errors = []
    for model, key in ((ModuleManifest, "manifests"), (ToolCall, "calls"), (ToolResult, "results")):
        for index, document in enumerate(documents[key]):
            try:
                model.model_validate(document)
            except ValidationError as error:
                errors.append(f"{key}[{index}]: {error}")
    for error in errors:
        print(error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
