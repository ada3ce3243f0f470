"""What the peer scripts share: running `ringtrain bench ...` as a child
process (allowed to run as root, as launch/env.sh allows mpirun) and failing
loudly, with its output, when it fails."""
import os
import subprocess


def run_ringtrain_bench(cmd):
    """Runs cmd and returns its stdout; raises RuntimeError with the output on failure."""
    env = dict(os.environ)
    if os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s%s" % (" ".join(cmd), out.returncode, out.stdout, out.stderr))
    return out.stdout
