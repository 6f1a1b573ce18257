"""The scenario and lesson files as data: found, decoded, validated, never run.

:mod:`.loading` (find, list, load ``scenarios/*.toml``), :mod:`.schema` (names and the validated
dataclasses), :mod:`.documents` (the files' keys as msgspec Structs, and their JSON Schema),
:mod:`.decoding` (TOML to a document, with collviz's messages), :mod:`.kinds` (one reader per
kind), :mod:`.training_kinds` (the training kinds' settings and narration keys), :mod:`.arrays`
(the worked examples' numbers), :mod:`.lessons` and :mod:`.notes` (a teacher's notes).

Imports only :mod:`~collviz.runtime.wire` (file reading, the note mark) and
:mod:`~collviz.runtime.errors`; never torch, zmq, textual, rich nor a process (an import-linter
contract): the command line reads scenario files without loading torch.
"""
