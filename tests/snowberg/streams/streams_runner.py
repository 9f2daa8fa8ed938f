"""Run one stream step in a separate process, so ``SNOWBERG_FAULT=<point>`` can kill it for real."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def main() -> None:
    spec = json.loads(sys.argv[1])
    import snowflake.connector
    from pyiceberg.catalog.sql import SqlCatalog
    from stream_double import StreamDouble
    from streams_harness import connect_kwargs, live_connect

    from snowberg.config import TableConfig
    from snowberg.streams.settings import StreamSource
    from snowberg.streams.steps import cleanup_step, consume_step, load_step

    if spec["live"]:
        raw = conn = live_connect(spec["db"])
    else:
        raw = snowflake.connector.connect(**connect_kwargs(spec["server"]), database=spec["db"], schema="SRC")
        conn = StreamDouble(raw, database=spec["db"])
    cat = SqlCatalog("lake", **spec["catalog"])
    cfg = TableConfig.model_validate(spec["cfg"])
    stream = StreamSource.model_validate(spec["stream"])
    step = spec["step"]
    if step == "consume":
        out = consume_step(cfg, stream, conn, cat, run_id=spec["run_id"])
    elif step == "load":
        out = load_step(cfg, stream, conn, cat, run_id=spec["run_id"], consumed=spec["consumed"])
    elif step == "cleanup":
        out = cleanup_step(cfg, stream, conn, cat)
    else:
        raise SystemExit(f"unknown step {step}")
    raw.close()
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
