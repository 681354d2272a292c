import json
import threading
import urllib.request
from http.server import ThreadingHTTPServer

from webhook_sink import Sink


def test_the_sink_answers_a_webhook_with_200_and_prints_it(capsys):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        request = urllib.request.Request(
            f"http://127.0.0.1:{server.server_address[1]}/fulfil",
            data=json.dumps({"orderId": "o-1"}).encode(),
            headers={"content-type": "application/json", "idempotency-key": "k-1"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200
            assert json.loads(answer.read()) == {"received": True}
    finally:
        server.shutdown()
        server.server_close()
    assert capsys.readouterr().out == 'POST /fulfil k-1 {"orderId": "o-1"}\n'
