package fabric

func childMain(role string) int { return 2 }
