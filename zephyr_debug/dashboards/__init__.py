"""Telemetry as code: Grafana dashboards and Prometheus alert rules over the coordinator's metrics.

`grafana.dashboard()` builds the dashboard (grafana-foundation-sdk, the `dashboards` extra),
`alerts.rules(thresholds)` the rule file; `python -m zephyr_debug.dashboards` (`make
dashboards`) writes both, plus Grafana provisioning files, into `dashboards/`.
"""
