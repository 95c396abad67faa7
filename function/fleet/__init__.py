"""One model over several clusters: placements, the global route and spillover."""
