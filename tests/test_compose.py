"""Structure of docker-compose.yaml, docker/Dockerfile and .env.example (Docker cannot run in CI).

What ``docker compose up`` needs and what a user relies on: every service
present with a pinned image, a health check on each long-running service,
start order through health conditions, dags/ and include/ mounted (snowberg
itself installed in the image from its wheel, as a deployment does), the
settings snowberg reads (connection, catalog, tables config) coming from the
env file, and an ``.env.example`` that names every variable the compose file
interpolates.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
COMPOSE = REPO / "docker-compose.yaml"
DOCKERFILE = REPO / "docker" / "Dockerfile"
ENV_EXAMPLE = REPO / ".env.example"

AIRFLOW_SERVICES = {
    "airflow-apiserver": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
    "airflow-worker": "celery worker",
}
INFRA = {"postgres", "redis", "minio", "iceberg-rest", "snowflake-emulator"}
ONE_SHOT = {"airflow-init", "minio-init", "demo-seed"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


@pytest.fixture(scope="module")
def env_example() -> dict[str, str]:
    out = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f".env.example: not KEY=VALUE: {line!r}"
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", key), key
        out[key] = value.strip("'\"")
    return out


def test_every_service_is_there(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == set(AIRFLOW_SERVICES) | INFRA | ONE_SHOT


def test_images_are_pinned(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        image = svc.get("image")
        assert image, f"{name}: no image"
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and "$" not in image, f"{name}: image {image!r} is not pinned"
        assert re.search(r"\d", tag), f"{name}: tag {tag!r} names no version"


def test_airflow_image_is_built_from_the_dockerfile_on_a_pinned_base(services: dict[str, dict[str, Any]]) -> None:
    for name in [*AIRFLOW_SERVICES, "airflow-init", "demo-seed", "snowflake-emulator"]:
        build = services[name].get("build")
        assert build == {"context": ".", "dockerfile": "docker/Dockerfile"}, f"{name}: build {build!r}"
        assert services[name]["image"] == "snowberg-airflow:3.3.2"
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG AIRFLOW_VERSION=3\.3\.2$", text, re.M)
    assert re.search(r"^FROM apache/airflow:\$\{AIRFLOW_VERSION\}-python\$\{PYTHON_VERSION\}$", text, re.M)
    assert '"apache-airflow==${AIRFLOW_VERSION}"' in text  # installing snowberg never moves Airflow
    # Built from the wheel of the checkout (stage "wheel"), with the emulator's "local" extra; not editable.
    assert re.search(r"^FROM apache/airflow:\$\{AIRFLOW_VERSION\}-python\$\{PYTHON_VERSION\} AS wheel$", text, re.M)
    assert "pip wheel --no-cache-dir --no-deps --wheel-dir /tmp/snowberg-dist /tmp/snowberg-src" in text
    assert "COPY --from=wheel --chown=airflow:0 /tmp/snowberg-dist/ /tmp/snowberg-dist/" in text
    assert '"$(ls /tmp/snowberg-dist/snowberg-*-py3-none-any.whl)[local]"' in text
    assert " -e " not in text and "/opt/snowberg" not in text


def test_airflow_services_run_the_right_commands(services: dict[str, dict[str, Any]]) -> None:
    for name, command in AIRFLOW_SERVICES.items():
        assert services[name]["command"] == command


def test_long_running_services_have_health_checks(services: dict[str, dict[str, Any]]) -> None:
    for name in set(AIRFLOW_SERVICES) | INFRA:
        hc = services[name].get("healthcheck")
        assert hc and hc.get("test"), f"{name}: no health check"
        assert hc["test"][0] in ("CMD", "CMD-SHELL")
        for key in ("interval", "timeout", "retries"):
            assert key in hc, f"{name}: health check without {key}"
    assert any("pg_isready" in part for part in services["postgres"]["healthcheck"]["test"])
    assert "ping" in services["redis"]["healthcheck"]["test"]
    assert any("/api/v2/version" in p for p in services["airflow-apiserver"]["healthcheck"]["test"])
    assert any("8974/health" in p for p in services["airflow-scheduler"]["healthcheck"]["test"])
    assert any("DagProcessorJob" in p for p in services["airflow-dag-processor"]["healthcheck"]["test"])
    assert any("TriggererJob" in p for p in services["airflow-triggerer"]["healthcheck"]["test"])
    assert any("inspect ping" in p for p in services["airflow-worker"]["healthcheck"]["test"])


def _healthy_deps(svc: dict[str, Any]) -> dict[str, str]:
    deps = svc.get("depends_on") or {}
    assert isinstance(deps, dict), "depends_on must use conditions"
    return {k: v["condition"] for k, v in deps.items()}


def test_start_order_follows_health(services: dict[str, dict[str, Any]]) -> None:
    for name in AIRFLOW_SERVICES:
        deps = _healthy_deps(services[name])
        for infra in ("postgres", "redis", "iceberg-rest", "snowflake-emulator"):
            assert deps.get(infra) == "service_healthy", f"{name} does not wait for {infra}"
        assert deps.get("airflow-init") == "service_completed_successfully"
    assert _healthy_deps(services["airflow-init"]) == {"postgres": "service_healthy"}
    assert _healthy_deps(services["iceberg-rest"]) == {"minio-init": "service_completed_successfully"}
    assert _healthy_deps(services["minio-init"]) == {"minio": "service_healthy"}
    assert _healthy_deps(services["demo-seed"]) == {"snowflake-emulator": "service_healthy"}
    assert "airflow db migrate" in "\n".join(services["airflow-init"]["command"])


def test_dags_and_include_are_mounted_and_the_package_comes_from_the_image(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in AIRFLOW_SERVICES:
        mounts = {m.split(":")[0]: m.split(":")[1] for m in services[name]["volumes"]}
        assert mounts["./dags"] == "/opt/airflow/dags"
        assert mounts["./include"] == "/opt/airflow/include"
        # snowberg is installed from its wheel in the image; mounting the sources would shadow nothing and
        # mislead (edits would not be live), so they are not mounted.
        assert "./plugins" not in mounts
    text = DOCKERFILE.read_text()
    assert "COPY --chown=airflow:0 plugins/snowberg/ /tmp/snowberg-src/plugins/snowberg/" in text
    assert "COPY --chown=airflow:0 pyproject.toml README.md LICENSE /tmp/snowberg-src/" in text
    for path in ("dags", "plugins/snowberg", "include"):
        assert (REPO / path).is_dir()


def test_airflow_runs_celery_on_redis_and_postgres(services: dict[str, dict[str, Any]]) -> None:
    for name in AIRFLOW_SERVICES:
        env = services[name]["environment"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
        assert (
            env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
            and "@postgres/" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        )
        assert env["AIRFLOW__CELERY__BROKER_URL"].startswith("redis://redis:6379")
        assert env["AIRFLOW__CELERY__RESULT_BACKEND"].startswith("db+postgresql://")
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
        assert env["SNOWBERG_TABLES_CONFIG"].endswith("/opt/airflow/include/tables.yaml}")
        assert "${AIRFLOW_JWT_SECRET" in env["AIRFLOW__API_AUTH__JWT_SECRET"]  # one secret for every component
        assert services[name]["env_file"] == [{"path": ".env", "required": False}]


def test_the_env_file_points_at_the_local_stack_and_documents_the_real_one(
    env_example: dict[str, str], compose: dict[str, Any]
) -> None:
    import json

    conn = json.loads(env_example["AIRFLOW_CONN_SNOWFLAKE_DEFAULT"])
    assert conn["extra"]["host"] == "snowflake-emulator" and conn["extra"]["protocol"] == "http"
    assert conn["extra"]["port"] == 8000
    assert env_example["PYICEBERG_CATALOG__LAKE__TYPE"] == "rest"
    assert env_example["PYICEBERG_CATALOG__LAKE__URI"] == "http://iceberg-rest:8181"
    assert env_example["PYICEBERG_CATALOG__LAKE__S3__ENDPOINT"] == "http://minio:9000"
    assert env_example["PYICEBERG_CATALOG__LAKE__S3__ACCESS_KEY_ID"] == env_example["MINIO_ROOT_USER"]
    assert env_example["PYICEBERG_CATALOG__LAKE__S3__SECRET_ACCESS_KEY"] == env_example["MINIO_ROOT_PASSWORD"]
    text = ENV_EXAMPLE.read_text()
    assert "# AIRFLOW_CONN_SNOWFLAKE_DEFAULT=" in text and "private_key_content" in text  # the real-account form
    # Every ${VAR} the compose file interpolates is named in .env.example.
    used = set(re.findall(r"(?<!\$)\$\{([A-Z][A-Z0-9_]*)", COMPOSE.read_text()))
    assert used, "no interpolated variables found"
    missing = used - set(env_example)
    assert not missing, f".env.example lacks {sorted(missing)}"


def test_emulator_listens_beyond_localhost(services: dict[str, dict[str, Any]]) -> None:
    emu = services["snowflake-emulator"]
    assert emu["entrypoint"] == ["python", "-m", "snowberg.local.emulator"]  # keeps /data (fakesnow -s would not)
    cmd = emu["command"]
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0" and cmd[cmd.index("-p") + 1] == "8000"
    assert "fakesnow-data:/data" in emu["volumes"]


def test_iceberg_rest_catalog_uses_minio(services: dict[str, dict[str, Any]]) -> None:
    env = services["iceberg-rest"]["environment"]
    assert env["CATALOG_S3_ENDPOINT"] == "http://minio:9000"
    assert env["CATALOG_IO__IMPL"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert env["CATALOG_WAREHOUSE"].startswith("s3://")
    mc = "\n".join(services["minio-init"]["command"])
    assert "mc mb --ignore-existing" in mc


def test_named_volumes_are_declared(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    declared = set(compose.get("volumes") or {})
    for name, svc in services.items():
        for m in svc.get("volumes") or []:
            src = m.split(":")[0]
            if not src.startswith((".", "/")):
                assert src in declared, f"{name}: volume {src} not declared"
