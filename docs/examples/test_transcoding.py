import pytest
from workflow_runner.testing import WorkflowTestEnv

TENANT = "7f0c1a52-2c11-4a1e-9b1e-000000000001"


@pytest.fixture
def env():
    environ = {"CALLBACK_BASE_URL": "https://callbacks.example.com/"}
    with WorkflowTestEnv(modules=["transcoding"], environ=environ) as env:
        env.put_event(tenant=TENANT, type="video.uploaded", payload={"videoId": "v-1"})
        yield env


def link(env):
    [job] = env.webhooks
    return job.body["callback"]


def test_the_transcoder_beats_while_it_works_then_answers(env):
    for _ in range(6):  # half an hour of work, a heartbeat every four minutes
        env.advance("PT4M")
        env.heartbeat_callback(link(env))
    env.complete_callback(link(env), {"url": "https://cdn.example.com/v-1.mp4"})
    run = env.run(tenant=TENANT, workflow="transcoding", key="v-1")
    assert run.result == {"isSuccess": True, "url": "https://cdn.example.com/v-1.mp4"}


def test_a_transcoder_that_gives_up_fails_the_job_and_the_run_says_why(env):
    env.fail_callback(link(env), error="UnsupportedCodec", message="HEVC 4:4:4 is not supported")
    run = env.run(tenant=TENANT, workflow="transcoding", key="v-1")
    assert run.result == {"isSuccess": False, "error": "UnsupportedCodec"}


def test_a_transcoder_that_goes_silent_times_out_after_five_minutes(env):
    env.advance("PT4M")
    env.heartbeat_callback(link(env))
    env.advance("PT5M")
    run = env.run(tenant=TENANT, workflow="transcoding", key="v-1")
    assert run.result == {"isSuccess": False, "error": "transcoder did not answer"}
    assert "step 1: resumed by heartbeat_timeout" in [e.text for e in run.events]
