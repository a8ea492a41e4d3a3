from iez.cli import main

raise SystemExit(main())
