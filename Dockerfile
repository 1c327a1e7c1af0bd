# rl-digest as a long-running scheduler. Build: docker build -t rl-digest .
# State (the SQLite database, the lock, the heartbeat) and output live in volumes under /data;
# put your config.yaml (and readers.txt) in /data too, read-only. See README "Run with Docker".
FROM python:3.11-slim

# git: for outputs.git publishing; nothing else is needed at run time
RUN apt-get update \
 && apt-get install -y --no-install-recommends git \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml setup.py README.md config.yaml ./
COPY pipeline ./pipeline
COPY templates ./templates
COPY seeds ./seeds
COPY calendars ./calendars
RUN pip install --no-cache-dir ".[postgres]" && rm -rf /src

RUN useradd --create-home --uid 10001 --user-group rl-digest \
 && mkdir -p /data/state /data/out \
 && chown -R rl-digest:rl-digest /data
USER rl-digest
WORKDIR /data
VOLUME ["/data/state", "/data/out"]
ENV PYTHONUNBUFFERED=1

# healthy while the scheduler keeps writing state/heartbeat.json (every schedule.heartbeat_seconds)
HEALTHCHECK --interval=60s --timeout=30s --start-period=120s --retries=3 \
  CMD ["rl-digest", "status", "--check-heartbeat"]

ENTRYPOINT ["rl-digest"]
CMD ["schedule"]
