from refind_cli.cli import main

main()
