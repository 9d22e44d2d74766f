"""One module per experiment: validated parameters -> run on a Machine -> result rows."""
