"""``TaskSession``, mirroring ``popxl_addons.task_session``: a Session that
knows a task's input and output streams and its state (a ``NamedTensors``
of variables), counts its runs, and saves/loads checkpoints.

A checkpoint directory holds ``model/<key>.npz`` for each state variable
(one array named ``<key>``; a variable whose host data is an ``np.memmap``
is saved by copying its file instead), ``dataloader.bin`` when a dataloader
(an object with ``save(filename)`` and ``resume(filename)``) is set, and
``session_info.json`` with ``session_state`` (``{"steps": N}`` plus what
``add_session_state_info`` added). ``save_checkpoint`` keeps at most
``max_checkpoints`` directories, deleting the oldest. ipuxl runs a single
instance, so this process always writes the checkpoint. ``wandb://NAME``
paths go through Weights & Biases artifacts when ``wandb`` is installed.
"""
import os
from collections import deque
from typing import Dict, Iterable, Mapping, Optional, Union

import numpy as np

from ..session import Session
from ..streams import DeviceToHostStream, HostToDeviceStream
from ..tensor import Tensor
from .named_tensors import NamedTensorData, NamedTensors
from .streams import InputStreams, OutputStreams
from .utils import timer

__all__ = ["TaskSession", "write_variables_pb"]

_MODEL_DIR = "model"
_SESSION_FILE = "session_info.json"
_DATALOADER_FILE = "dataloader.bin"
_REPORT_METHODS = ("none", "warn", "error")


def write_variables_pb(session: Session, weights: Mapping[Tensor, np.ndarray]) -> None:
    """Write variable data into ``session`` (popxl_addons' workaround for an
    old PopXL limitation; here the same as ``session.write_variables_data``)."""
    session.write_variables_data(dict(weights))


def _log():
    import logging  # imported when used: keeps logging out of every ipuxl process

    return logging


def _report_missing(found: Iterable[str], wanted: Iterable[str], method: str) -> None:
    if method not in _REPORT_METHODS:
        raise ValueError(f"report_missing must be one of {_REPORT_METHODS}, got {method!r}")
    if method == "none":
        return
    found, wanted = set(found), set(wanted)
    lines = []
    if found - wanted:
        lines.append(f"Checkpoint keys not in state: {sorted(found - wanted)}")
    if wanted - found:
        lines.append(f"state keys not in checkpoint: {sorted(wanted - found)}")
    if lines:
        if method == "error":
            raise ValueError("\n".join(lines))
        _log().warning("\n".join(lines))


class TaskSession(Session):
    """A Session with the task's streams and state.

    Args:
        inputs: the input streams (an ``InputStreams``, or any iterable of
            h2d streams, then keyed by tensor id).
        outputs: the output streams, likewise.
        state: the variables to checkpoint.
        max_checkpoints: how many checkpoint directories ``save_checkpoint``
            keeps.
        *args, **kwargs: for ``Session`` (``ir``, ``device_desc`` ...).
    """

    def __init__(self, inputs: Union[InputStreams, Iterable[HostToDeviceStream]],
                 outputs: Union[OutputStreams, Iterable[DeviceToHostStream]],
                 state: NamedTensors, max_checkpoints: int = 1, *args, **kwargs):
        with timer("PopXL compilation"):
            super().__init__(*args, **kwargs)
        self.inputs = inputs if isinstance(inputs, InputStreams) else \
            InputStreams.from_streams(inputs)
        self.outputs = outputs if isinstance(outputs, OutputStreams) else \
            OutputStreams.from_streams(outputs)
        self.state = state
        self.session_state: Dict = {"steps": 0}
        self._dataloader = None
        self._checkpoints = deque()
        self._max_checkpoints = max_checkpoints

    # ---- dataloader and extra state
    @property
    def dataloader(self):
        if self._dataloader is None:
            _log().warning("No dataloader set. Checkpoint support is incomplete. "
                            "You won't be able to resume training.")
        return self._dataloader

    @dataloader.setter
    def dataloader(self, dl):
        if not (hasattr(dl, "save") and hasattr(dl, "resume")):
            raise ValueError("Dataloader must implement save and resume methods")
        self._dataloader = dl

    def add_session_state_info(self, info: Dict) -> None:
        """Add entries (JSON-serialisable) saved with every checkpoint."""
        self.session_state.update(info)

    # ---- state
    def get_named_tensors_data(self) -> NamedTensorData:
        """The state's current values, keyed like ``state``."""
        named = self.state.to_dict()
        data = self.get_tensors_data(list(named.values()))
        return NamedTensorData.from_dict({k: data[t] for k, t in named.items()})

    def load_from_session(self, src: "TaskSession", report_missing: str = "none") -> None:
        """Copy the values of ``src``'s state into the variables of this
        session's state that have the same keys."""
        src_named = src.state.to_dict()
        mine = self.state.to_dict()
        _report_missing(src_named.keys(), mine.keys(), report_missing)
        values = src.get_tensors_data(list(src_named.values()))
        self.write_variables_data({mine[k]: values[t] for k, t in src_named.items() if k in mine})

    def run(self, inputs=None, downcast_inputs: bool = True):
        """``Session.run``, counting the runs in ``session_state["steps"]``."""
        self.session_state["steps"] += 1
        return super().run(inputs, downcast_inputs)

    # ---- checkpoints
    def save_checkpoint(self, checkpoint_dir: str) -> None:
        """Save the state, the dataloader and ``session_state`` to
        ``checkpoint_dir`` (see the module docstring)."""
        import shutil
        import tempfile

        with timer("Get tensor data from IPU ... "):
            state = self.get_named_tensors_data().to_dict()
        with timer(f"Saving checkpoint {checkpoint_dir} ... "):
            if checkpoint_dir.startswith("wandb://"):
                import wandb

                name = checkpoint_dir[len("wandb://"):]
                artifact = wandb.Artifact(name=name, type="checkpoints")
                with tempfile.TemporaryDirectory() as td:
                    self._write_checkpoint(td, state)
                    artifact.add_dir(td)
                wandb.log_artifact(artifact)
                return
            checkpoint_dir = os.path.expanduser(checkpoint_dir)
            if len(self._checkpoints) >= self._max_checkpoints:
                old = self._checkpoints.popleft()
                if os.path.abspath(old) != os.path.abspath(checkpoint_dir):
                    shutil.rmtree(old, ignore_errors=True)
            self._write_checkpoint(checkpoint_dir, state)
            self._checkpoints.append(checkpoint_dir)

    def _write_checkpoint(self, directory: str, state: Dict[str, np.ndarray]) -> None:
        import json
        import shutil

        model = os.path.join(directory, _MODEL_DIR)
        os.makedirs(model, exist_ok=True)
        for key, arr in state.items():
            base = arr if isinstance(arr, np.memmap) else getattr(arr, "base", None)
            if isinstance(base, np.memmap) and getattr(base, "filename", None):
                base.flush()
                shutil.copyfile(base.filename, os.path.join(model, os.path.basename(base.filename)))
            else:
                np.savez(os.path.join(model, f"{key}.npz"), **{key: np.asarray(arr)})
        if self._dataloader is not None:
            self._dataloader.save(os.path.join(directory, _DATALOADER_FILE))
        with open(os.path.join(directory, _SESSION_FILE), "w") as f:
            json.dump(self.session_state, f)

    def load_checkpoint(self, checkpoint_dir: str, report_missing: str = "warn",
                        skip_memmap: bool = False) -> None:
        """Load a checkpoint written by :meth:`save_checkpoint`: the state
        variables found in it, the dataloader position and ``session_state``
        (``{"steps": 0}`` when the checkpoint has no session file).
        ``report_missing`` ("none", "warn", "error") says what to do about
        keys present on one side only."""
        with timer(f"Loading checkpoint {checkpoint_dir} ... "):
            if checkpoint_dir.startswith("wandb://"):
                import wandb

                artifact = wandb.use_artifact(checkpoint_dir[len("wandb://"):], type="checkpoints")
                checkpoint_dir = artifact.download()
            self._read_checkpoint(os.path.expanduser(checkpoint_dir), report_missing)

    def _read_checkpoint(self, directory: str, report_missing: str) -> None:
        import glob
        import json

        named = self.state.to_dict()
        model = os.path.join(directory, _MODEL_DIR)
        on_disk = {os.path.basename(p)[:-len(".npz")]: p
                   for p in glob.glob(os.path.join(model, "*.npz"))}
        _report_missing(on_disk.keys(), named.keys(), report_missing)
        data = {}
        for key, t in named.items():
            if key in on_disk:
                with np.load(on_disk[key], allow_pickle=False) as z:
                    data[t] = z[key]
        self.write_variables_data(data)
        if self._dataloader is not None:
            self._dataloader.resume(filename=os.path.join(directory, _DATALOADER_FILE))
        try:
            with open(os.path.join(directory, _SESSION_FILE)) as f:
                loaded = json.load(f)
        except FileNotFoundError:
            loaded = {"steps": 0}
        _report_missing(loaded.keys(), self.session_state.keys(), report_missing)
        self.session_state = loaded


def initialise_memmap_dir_from_checkpoint(checkpoint_dir: str, memmap_dir: str) -> None:
    """Copy the memmap files (``model/*.npy``) of a checkpoint into ``memmap_dir``."""
    import glob
    import shutil

    for f in glob.glob(os.path.join(checkpoint_dir, _MODEL_DIR, "*.npy")):
        shutil.copyfile(f, os.path.join(memmap_dir, os.path.basename(f)))
