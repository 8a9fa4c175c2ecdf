"""Grading on a host whose TMPDIR is not /tmp (a cluster job's scratch folder, a folder of the
grader's own). The sandbox gives each kernel a private /tmp and hides or freezes the rest:
every kernel died at its start there until the sandbox made that private /tmp the kernel's
temp folder, whatever the grader's TMPDIR named (autograder/sandbox/enter.py). A scratch folder's
path can also be long: past about 60 characters, the zygotes' sockets no longer fit AF_UNIX's
108 bytes there, and each grading waited two minutes, then started its processes cold, until the
sockets went where they fit (autograder/pipeline/warm.py)."""
import os
import shutil
import tempfile
from pathlib import Path

import pytest

A = "08_amp_tensor_cores"  # the lightest notebook to grade


@pytest.mark.parametrize("where", ["the grader's own folder under /tmp", "a long scratch folder outside /tmp"])
def test_a_grader_whose_temp_folder_is_not_tmp_grades_to_full_marks(where, tmp_path, course_tools, request):
    if where.startswith("the grader's own"):
        temp = Path(tempfile.mkdtemp(prefix="cgt-", dir="/tmp"))             # 0700, the grader's alone
        request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    else:
        scratch = Path(tempfile.mkdtemp(prefix="cgt-", dir="/var/tmp"))      # the sandbox mounts its own /var/tmp
        request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
        temp = scratch / "slurm-job-4711.scheduler.hpc.example.edu" / "local" / "tmp"
        temp.mkdir(parents=True)
        # The zygotes' socket would not fit there (.../course-zygote-sandbox-XXXXXXXX/socket.new).
        assert len(os.fsencode(temp)) + len("/course-zygote-sandbox-XXXXXXXX/socket.new") > 107
        temp.chmod(0o1777)
    db_url = course_tools.prepare(tmp_path, [A])
    done = course_tools.cli("grade", A, "--students", "sample_perfect", workdir=tmp_path, db_url=db_url,
                            env={"TMPDIR": str(temp)})
    cells = {key[2]: value for key, value in course_tools.scores(tmp_path, db_url, [A]).items()
             if key[0] == "sample_perfect"}
    assert cells and all(got == top for got, top in cells.values()), f"{cells}\n{done.stdout[-2000:]}"
