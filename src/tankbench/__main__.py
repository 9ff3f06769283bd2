from tankbench.cli import main

raise SystemExit(main())
