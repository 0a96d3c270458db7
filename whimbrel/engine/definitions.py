"""The engine's definitions (a part of the engine): registering a version, and the
definition a name, a version or a run stands for (each version parsed once)."""

from __future__ import annotations

import threading

from whimbrel.contract import checks
from whimbrel.contract.code.definition import CodeDefinition
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import DefinitionNotFound, InvalidDefinition, InvalidInput
from whimbrel.contract.records import ActivityRecord, DefinitionRecord, WorkflowRecord
from whimbrel.engine import rules
from whimbrel.engine.feature import Core, Feature


class Definitions:
    """Registered definitions, read through and parsed once per version."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._lock = threading.Lock()
        self._definitions: dict[tuple[str, int], WorkflowDefinition] = {}

    def register(self, definition: WorkflowDefinition) -> int:
        """Store ``definition`` as a new version (or return the version it equals).

        Raises:
            InvalidInput: not a ``WorkflowDefinition``.
            InvalidDefinition: listing every problem.
        """
        if not isinstance(definition, WorkflowDefinition):
            raise InvalidInput(f"a WorkflowDefinition is needed, not {type(definition).__name__}"
                               " (load text with WorkflowDefinition.from_yaml/from_json)",
                               field="definition")
        definition.validate()
        problems = [p for ps in self.core.hooks.observe(Feature.registering, definition)
                    for p in ps]
        if problems:
            raise InvalidDefinition(definition.name, problems)
        text = definition.to_json()
        while True:
            latest = self.core.store.cold.latest_definition(definition.name)
            if latest is not None and latest.definition == text:
                return latest.version
            version = latest.version + 1 if latest is not None else 1
            record = DefinitionRecord(definition.name, version, text, self.core.clock(),
                                      definition.description or None)
            # Copies first, version after: a start never sees a number whose version
            # it cannot read back the moment this returns (Store.point_latest).
            self.core.store.cold.point_latest(definition.name, version)
            if self.core.store.cold.put_definition(record):
                with self._lock:
                    self._definitions[(definition.name, version)] = definition
                return version

    def definition(self, name: str, version: int | None = None) -> tuple[int, WorkflowDefinition]:
        """The definition ``name`` at ``version`` (latest when None).

        Raises:
            DefinitionNotFound: no such name or version.
            InvalidInput: the name or version is malformed.
        """
        version = checks.version(version)
        checks.workflow_name(name)
        if version is not None:
            cached = self._parsed(name, version)
            if cached is not None:
                return version, cached
            item = self.core.store.cold.get_definition(name, version)
        else:
            found = self.core.latest.resolve(name, lambda v: self._parsed(name, v))
            if isinstance(found, tuple):
                return found
            item = found
        if item is None:
            raise DefinitionNotFound(name, version)
        cached = self._parsed(name, item.version)  # a version never changes: parse once
        if cached is not None:
            return item.version, cached
        defn = WorkflowDefinition.from_json(item.definition)
        with self._lock:
            self._definitions[(name, item.version)] = defn
        return item.version, defn

    def _parsed(self, name: str, version: int) -> WorkflowDefinition | None:
        with self._lock:
            return self._definitions.get((name, version))

    def definition_of(self, record: ActivityRecord | WorkflowRecord) -> WorkflowDefinition:
        """The definition a run captured when it started."""
        version = record.version if isinstance(record, WorkflowRecord) \
            else record.workflow_version
        if version is None:
            version = self.core.reads.workflow(record.workflow_exec_id).version
        defn = self.definition(record.workflow_name, version)[1]
        # A code run's steps are known from its rows (engine/code_steps.py).
        return self.core.steps.bind(defn, record) if isinstance(defn, CodeDefinition) else defn

    def retention(self, defn: WorkflowDefinition) -> float | None:
        """Seconds an ended run of ``defn`` is kept (None: forever)."""
        return rules.retention_seconds(defn, self.core.retention_days)
