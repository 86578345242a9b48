"""Analyzers: functions over `Evidence` whose typed results (`analysis.Analysis`, `findings.Finding`)
the commands render; `analysis.analyze` runs them once per job."""
