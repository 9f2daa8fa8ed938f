# snowberg on the official Airflow image: the image a deployment runs (docs/deployment.md).
#
#   uv build --wheel                  # or: python -m pip wheel --no-deps -w dist .  → dist/snowberg-<version>-py3-none-any.whl
#   snowberg init .                   # once: dags/ (two-line DAG files) and include/*.yaml of your project
#   docker build -f docker/deploy.Dockerfile -t my-registry/airflow-snowberg:3.3.2 .
#
# Every Airflow component (api-server, scheduler, dag-processor, triggerer, workers, Kubernetes task pods)
# runs this image. tests/install installs the same requirements (the pip line below) into a fresh venv,
# with the newest and the lowest versions snowberg's bounds allow, and runs the DAGs, a load, a volume
# check and the UI page there.
ARG AIRFLOW_VERSION=3.3.2
ARG PYTHON_VERSION=3.11
FROM apache/airflow:${AIRFLOW_VERSION}-python${PYTHON_VERSION}

ARG AIRFLOW_VERSION
# The wheel of this version only: dist/ may hold older builds, and a snowberg-* glob would install them all.
ARG SNOWBERG_VERSION=0.1.0
USER airflow
COPY --chown=airflow:0 dist/snowberg-${SNOWBERG_VERSION}-py3-none-any.whl /tmp/snowberg-dist/
# Pinning apache-airflow to the image's version keeps pip from up- or downgrading Airflow itself while it
# resolves snowberg's dependencies (pyiceberg, duckdb, the providers snowberg uses).
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" \
        /tmp/snowberg-dist/snowberg-${SNOWBERG_VERSION}-py3-none-any.whl \
    && rm -rf /tmp/snowberg-dist \
    && python -c "import snowberg.airflow.dag_factory, snowberg.checks.volume, duckdb, pyiceberg.catalog.sql"

# The project's DAG files and configs, baked in. The DAG files find /opt/airflow/include/*.yaml beside
# their folder; to ship configs apart from the image, mount them and set SNOWBERG_TABLES_CONFIG
# (docs/deployment.md, Kubernetes).
COPY --chown=airflow:0 dags/ /opt/airflow/dags/
COPY --chown=airflow:0 include/ /opt/airflow/include/
