from dot_inference.controlplane.plane import main

raise SystemExit(main())
