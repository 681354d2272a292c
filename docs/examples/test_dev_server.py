import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

HERE = Path(__file__).parent


def test_the_server_answers_at_the_printed_url_until_ctrl_c():
    data_dir = Path(tempfile.mkdtemp(prefix="wfr-dev-", dir="/tmp")) / "data"
    server = subprocess.Popen(
        [sys.executable, str(HERE / "dev_server.py"), str(data_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = server.stdout.readline().strip()
        assert url == f"postgresql://postgres:@/postgres?host={data_dir}"
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0
    assert not data_dir.exists()
