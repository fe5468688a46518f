print("speakbridge")
