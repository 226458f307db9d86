"""Finding where a sandbox job's cgroup goes (``adapters/sandbox/job_limits.py``), from the kernel's
own files as they read on the machines the server runs on, and what ``avm serve`` says about it.
Making and enforcing the cgroups is tested with real processes in
``tests/integration/test_sandbox_job_lifecycle.py``."""

from __future__ import annotations

from pathlib import Path

from agentvm.adapters.sandbox.job_limits import JobCgroups, cgroup_dir, parse_mountinfo, parse_proc_cgroup

HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
38 31 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_CGROUP = "8:pids:/\n4:memory:/process_api/83e6\n2:cpuacct:/\n0::/\n"


def test_a_v1_controller_is_found_under_its_own_mount_at_the_process_cgroup():
    mounts, own = parse_mountinfo(HYBRID_MOUNTINFO), parse_proc_cgroup(HYBRID_CGROUP)
    assert cgroup_dir(mounts, own, "memory") == Path("/sys/fs/cgroup/memory/process_api/83e6")
    assert cgroup_dir(mounts, own, "pids") == Path("/sys/fs/cgroup/pids")
    assert cgroup_dir(mounts, own, "") == Path("/sys/fs/cgroup/unified")
    assert cgroup_dir(mounts, own, "cpu") is None  # not mounted here


def test_a_container_sees_its_v2_hierarchy_from_its_own_cgroup_down():
    mounts = parse_mountinfo("29 22 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n")
    inside = parse_proc_cgroup("0::/docker/abc/app.scope\n")
    elsewhere = parse_proc_cgroup("0::/system.slice/other.service\n")
    assert cgroup_dir(mounts, inside, "") == Path("/sys/fs/cgroup/app.scope")
    assert cgroup_dir(mounts, elsewhere, "") is None


def test_start_up_says_which_limits_hold_per_job_and_which_per_process():
    none = JobCgroups(0, {}).describe()
    v1 = JobCgroups(1, {"memory": Path("/m"), "pids": Path("/p"), "cpu": Path("/c")}).describe()
    v1_without_memory = JobCgroups(1, {"pids": Path("/p")}).describe()
    assert none.startswith("sandbox limits per process (rlimits")
    assert "no bound on a job's process count" in none
    assert v1 == (
        "sandbox limits per job (cgroup v1): memory, pids, cpu; per process (rlimits): file size, CPU time"
    )
    assert "per job (cgroup v1): pids;" in v1_without_memory and "address space" in v1_without_memory
