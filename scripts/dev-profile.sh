# Sourced by scripts/test and scripts/publish-check: exports the root Cargo.toml's `[profile.dev]`
# settings as CARGO_PROFILE_DEV_* variables, for the cargo builds that read another manifest:
# trybuild's project (mcp-middleware's `--test ui`, target/tests/trybuild) and `cargo publish`'s
# verification (each package's own Cargo.toml). Without them both build every dependency with
# cargo's default full debug info: slower, several GB larger, and (for the verification, which
# shares the target directory) never the artifacts the workspace's own build already made.
# The manifest stays the one owner of the values; settings already in the environment win.
while IFS='=' read -r name value; do
  if [ -n "$name" ] && [ -z "${!name+set}" ]; then
    export "$name=$value"
  fi
done < <(python3 - "$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    dev = tomllib.load(f).get("profile", {}).get("dev", {})
for key, value in dev.items():
    if isinstance(value, dict):
        continue  # [profile.dev.package.*] / build-override: no environment form
    text = str(value).lower() if isinstance(value, bool) else str(value)
    print(f"CARGO_PROFILE_DEV_{key.upper().replace('-', '_')}={text}")
PY
)
