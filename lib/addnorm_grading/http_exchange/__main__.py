from addnorm_grading.http_exchange.service import main

main()
