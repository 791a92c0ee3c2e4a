"""The driver's handle of a benchmark peer running in its own process.

Shared by ``mnist_step.py`` and ``_step_bench.py`` (the driver of
``transformer_step.py`` and ``gptj_step.py``): each peer (ipuxl, NumPy,
PyTorch, JAX) runs ``worker(name, conn, opts)`` of the calling script in a
child process, answers a hello ``{"note", "version"}``, then one reply per
command tuple; a reply ``{"error": text}`` is raised here.
"""


class Peer:
    """Driver-side handle of a worker process."""

    def __init__(self, name, opts, ctx, worker):
        self.name = name
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=worker, args=(name, child, opts), daemon=True)
        self.proc.start()
        child.close()
        hello = self.conn.recv()
        self.note, self.version = hello["note"], hello["version"]

    def call(self, *cmd):
        self.conn.send(cmd)
        r = self.conn.recv()
        if isinstance(r, dict) and "error" in r:
            raise RuntimeError(r["error"])
        return r

    def close(self):
        if self.proc.is_alive():
            try:
                self.conn.send(("exit",))
            except (BrokenPipeError, OSError):
                pass
            self.proc.join(30)
        if self.proc.is_alive():
            self.proc.terminate()
