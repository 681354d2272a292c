"""An embedded PostgreSQL server until Ctrl-C (its data is deleted on exit)."""

import sys
import time

from workflow_runner.embedded import start_embedded_postgres

data_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/wfr-dev"
server, url = start_embedded_postgres(data_dir=data_dir)
print(url, flush=True)
try:
    time.sleep(10**9)
except KeyboardInterrupt:
    pass
finally:
    server.cleanup()
