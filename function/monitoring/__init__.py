"""The function side of monitoring: the model's Grafana dashboard and the PromQL that KEDA's
prometheus scaler and the dashboard read (docs/inferencecluster.md, Monitoring)."""
