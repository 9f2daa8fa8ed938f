"""The wheel a deployment installs, tested in venvs that hold only the wheel and what it declares.

For each of the newest and the lowest versions snowberg's bounds allow (``wheel_venv``, the newest on the
newest Python this machine has, the lowest on the oldest): every module imports and every import is a
declared dependency; ``snowberg init`` writes the example project; Airflow's DagBag parses its two-line
DAG files; the demo orders load and their volume check pass through ``dag.test()`` on the local stack
(the emulator from the dev venv over HTTP, a SQLite lake); a real ``airflow api-server`` serves the UI
page, registered by the entry point, to a logged-in user; the CLI finds configs in the project, never in
site-packages, finds a catalog connection stored with ``airflow connections add``, and without the
``local`` extra ``snowberg stack up`` says to install it. On every other Python the classifiers list
(``other_python_venv``) the wheel installs, the DAGs parse, and the load and its volume check pass.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from wheel_env import REPO, WheelVenv, run, runtime_requirements

from snowberg.cli import LOCAL_EXTRA_HINT
from snowberg.config.examples import example_files
from snowberg.local.stack import free_port, stack_env

sys.path.insert(0, str(REPO / "tests" / "e2e"))  # reuse the e2e suite's process handling and REST login
from airflow_stack import ADMIN_PASSWORD, ADMIN_USER, ApiClient, Service, stop_all  # noqa: E402

pytestmark = pytest.mark.slow
IN_VENV = Path(__file__).with_name("in_venv.py")


def result(res: Any) -> dict[str, Any]:
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, f"no RESULT line:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return dict(json.loads(line[len("RESULT ") :]))


def test_the_wheel_carries_the_license_the_examples_and_both_entry_points(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        eps = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        license_text = z.read(next(n for n in names if n.endswith(".dist-info/licenses/LICENSE")))
        examples = {
            n.removeprefix("snowberg/examples/"): z.read(n) for n in names if n.startswith("snowberg/examples/")
        }
    assert "License-Expression: Apache-2.0" in meta.splitlines()
    assert license_text == (REPO / "LICENSE").read_bytes()
    assert b"Apache License" in license_text and b"Version 2.0, January 2004" in license_text
    assert "[airflow.plugins]\nsnowberg = snowberg.airflow.ui_plugin:SnowbergUiPlugin" in eps
    assert "[apache_airflow_provider]\nprovider_info = snowberg.airflow.provider_info:get_provider_info" in eps
    assert "[console_scripts]\nsnowberg = snowberg.cli:main" in eps
    assert examples == example_files()
    assert not [n for n in names if n.startswith(("tests/", "dags/", "include/", "bench/")) or "__pycache__" in n]
    # Test-tool needs stay in extras: nothing of the emulator is a runtime requirement.
    assert not [r for r in runtime_requirements(wheel) if r.lower().startswith(("fakesnow", "moto", "pytest"))]
    assert not [r for r in runtime_requirements(wheel) if r.startswith("snowflake-connector-python") and "<" in r]


def test_the_install_resolves_to_the_bounds(wheel_venv: WheelVenv) -> None:
    v = wheel_venv.versions
    print(
        f"\n{wheel_venv.kind} install ({wheel_venv.python_path}): {wheel_venv.install_seconds} s; "
        + ", ".join(
            f"{n} {v.get(n)}"
            for n in (
                "apache-airflow",
                "apache-airflow-providers-snowflake",
                "snowflake-connector-python",
                "pyiceberg",
                "pyarrow",
                "numpy",
                "pandas",
                "duckdb",
                "pydantic",
                "sqlalchemy",
            )
        )
    )
    assert v["apache-airflow"] == "3.3.2"  # the recipe pins the image's Airflow
    assert "fakesnow" not in v and "moto" not in v and "pytest" not in v
    if wheel_venv.kind == "lowest":
        # snowberg's own floors are what lowest-direct installs.
        assert v["apache-airflow-providers-snowflake"] == "6.20.0"
        assert v["pyiceberg"] == "0.12.0"
        assert v["duckdb"] == "1.1.1"
        assert v["apache-airflow-providers-openlineage"] == "2.20.0"
    else:
        assert int(v["pyarrow"].split(".")[0]) >= 22 and int(v["numpy"].split(".")[0]) >= 2


def test_every_module_imports_and_every_import_is_declared(wheel_venv: WheelVenv, tmp_path: Path) -> None:
    res = run([wheel_venv.python, str(IN_VENV), "imports"], cwd=tmp_path, env=wheel_venv.env(), timeout=600)
    got = result(res)
    assert Path(got["snowberg_file"]).is_relative_to(wheel_venv.root), got["snowberg_file"]  # not the checkout
    assert got["version"] == got["dist_version"]
    assert got["modules"] > 100
    assert got["unimportable"] == {}
    assert got["undeclared"] == {}
    # The emulator's modules need the local extra (absent here); no other module imports its packages.
    assert got["needs_local"] and all(m.startswith("snowberg.local.") for m in got["needs_local"]), got["needs_local"]
    users = {f for files in got["local_imports"].values() for f in files}
    assert users and all(f.startswith("local/") for f in users), got["local_imports"]
    # jsonschema checks the date-time format only with rfc3339-validator installed (a declared dependency).
    assert got["date_time_format_checked"] and got["run_param_refuses_basic_format"]


def _api_server(venv: WheelVenv, env: dict[str, str], home: Path, port: int) -> Service:
    svc = Service(
        "api-server",
        [str(venv.bin / "airflow"), "api-server", "--port", str(port), "--host", "127.0.0.1"],
        env,
        home / "api-server.log",
        home,
    )
    svc.start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if not svc.alive():
            raise RuntimeError(f"api-server exited:\n{svc.tail(60)}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v2/version", timeout=5).status_code == 200:
                return svc
        except httpx.HTTPError:
            pass
        time.sleep(1)
    stop_all([svc])
    raise TimeoutError(f"api-server not up after 180 s:\n{svc.tail(60)}")


def _deployed(venv: WheelVenv, emulator: Any, tmp_path: Path, **extra_env: str) -> tuple[dict[str, str], Path]:
    """The project ``snowberg init`` writes, Airflow's metadata DB migrated, the demo loaded and checked."""
    project, home = tmp_path / "project", tmp_path / "airflow"
    home.mkdir(exist_ok=True)
    (tmp_path / "lake" / "warehouse").mkdir(parents=True)
    env = venv.env(
        **stack_env(tmp_path, emulator.port),
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(project / "dags"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        **extra_env,
    )
    run([str(venv.bin / "snowberg"), "init", str(project)], cwd=tmp_path, env=env)
    assert {str(p.relative_to(project)) for p in project.rglob("*.*")} == set(example_files())
    run([str(venv.bin / "airflow"), "db", "migrate"], cwd=project, env=env, timeout=600)
    got = result(run([venv.python, str(IN_VENV), "deploy"], cwd=project, env=env, timeout=900))
    assert got["import_errors"] == {}
    for dag_id in (
        "snowberg_demo_orders",
        "snowberg_demo_orders__checks",
        "snowberg_demo_orders__maintenance",
        "snowberg_demo_menu",
        "snowberg_demo_brand_margin",
        "snowberg_sync_menu_to_native",
    ):
        assert dag_id in got["dag_ids"], got["dag_ids"]
    assert got["load"]["state"] == "success", got["load"]
    assert got["lake_rows"] == emulator.seeded["orders"]
    assert got["checks"]["tasks"]["check_volume"] == "success", got["checks"]
    return env, project


def test_a_load_runs_on_every_other_python(other_python_venv: WheelVenv, emulator: Any, tmp_path: Path) -> None:
    venv = other_python_venv
    t = time.monotonic()
    _deployed(venv, emulator, tmp_path)
    python = run([venv.python, "-c", "import sys; print(sys.version.split()[0])"]).stdout.strip()
    print(f"\nPython {python}: install {venv.install_seconds} s, project + load + check {time.monotonic() - t:.0f} s")


def test_a_project_from_the_wheel_parses_loads_checks_and_shows_the_page(
    wheel_venv: WheelVenv, emulator: Any, tmp_path: Path
) -> None:
    venv = wheel_venv
    home = tmp_path / "airflow"
    home.mkdir()
    (home / "plugins").mkdir()  # empty: the UI page comes from the entry point
    (home / "passwords.json").write_text(json.dumps({ADMIN_USER: ADMIN_PASSWORD}))
    port = free_port()
    env, project = _deployed(
        venv,
        emulator,
        tmp_path,
        AIRFLOW__CORE__PLUGINS_FOLDER=str(home / "plugins"),
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=f"{ADMIN_USER}:admin",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(home / "passwords.json"),
        AIRFLOW__API__BASE_URL=f"http://127.0.0.1:{port}",
        AIRFLOW__API__WORKERS="1",
        AIRFLOW__API__SECRET_KEY=secrets.token_hex(16),
        AIRFLOW__API_AUTH__JWT_SECRET=secrets.token_hex(32),
        NO_PROXY="*",
        no_proxy="*",
    )

    # The CLI takes configs from the current directory, never from where it is installed.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = subprocess.run(
        [str(venv.bin / "snowberg"), "inspect", "demo_orders", "snapshots"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 2 and "no tables config was found" in res.stderr, res.stderr[-2000:]
    assert "site-packages" not in res.stderr

    # From the project directory the same command finds ./include/tables.yaml and reads the loaded table.
    snaps = run([str(venv.bin / "snowberg"), "inspect", "demo_orders", "snapshots", "--json"], cwd=project, env=env)
    assert json.loads(snaps.stdout)[0]["operation"] in ("append", "overwrite"), snaps.stdout[-2000:]

    # A deployment without the local extra: `stack up` is a one-line hint, no traceback.
    res = subprocess.run(
        [str(venv.bin / "snowberg"), "stack", "up"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300
    )
    assert (res.returncode, res.stderr) == (2, f"snowberg stack: {LOCAL_EXTRA_HINT}\n"), res.stderr[-2000:]

    if venv.kind == "newest":
        # The deployer's way to store a connection: `airflow connections add` (an `iceberg` connection of the
        # Iceberg provider, named like the catalog the tables use), then the CLI finds it in Airflow's metadata
        # database, with the pyiceberg settings for that catalog gone from its environment.
        lake = stack_env(tmp_path, emulator.port)
        props = {"type": "sql", "uri": lake["PYICEBERG_CATALOG__LAKE__URI"]}
        props["warehouse"] = lake["PYICEBERG_CATALOG__LAKE__WAREHOUSE"]
        add = ["connections", "add", "lake", "--conn-type", "iceberg", "--conn-extra", json.dumps(props)]
        run([str(venv.bin / "airflow"), *add], cwd=project, env=env)
        without = {k: v for k, v in env.items() if not k.startswith("PYICEBERG_CATALOG__LAKE__")}
        rows = run(
            [str(venv.bin / "snowberg"), "read", "demo_orders", "--limit", "3", "--json"], cwd=project, env=without
        )
        assert len(json.loads(rows.stdout)) == 3, rows.stderr[-2000:]

    svc = _api_server(venv, env, home, port)
    try:
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/snowberg/", timeout=30).status_code == 401  # behind Airflow's login
        token = ApiClient(base).http.headers["Authorization"]
        page = httpx.get(f"{base}/snowberg/", headers={"Authorization": token}, timeout=60)
        assert page.status_code == 200 and "demo_orders" in page.text, page.text[:2000]
        tables = httpx.get(f"{base}/snowberg/api/tables", headers={"Authorization": token}, timeout=60).json()
        orders = next(t for t in tables if t["name"] == "demo_orders")
        assert orders["exists"] and orders["rows"] == emulator.seeded["orders"], orders
    finally:
        stop_all([svc])
