
batchedreq-1*
xFP32*
idsINT64*
maskBOOL*
hFP16:$+29@GNU\cjqxÜçîõ¢:$+29@GNU\cj::